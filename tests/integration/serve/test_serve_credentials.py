"""Every operator request needs a credential, on loopback too; a worker's credential is named
and revocable; a completion must fit the run its lease was for. Through a real serve (uvicorn
on loopback) and, for the hostile cases, from inside an agent's run."""

from __future__ import annotations

import hashlib
import json
import os
import stat

import httpx

from core.domain.models import TaskState
from t25_tui.api.credentials import (
    LOCAL_TOKEN,
    TOKEN_FILE_ENV,
    WORKERS_ENV,
    local_operator,
    local_token,
    operator_token,
)
from t25_tui.api.server import make_api
from tests.support.operators import operator_headers
from tests.support.pipeline import Env
from tests.support.sandbox import committed_check
from tests.support.serving import CREDENTIAL, WORKER, serving


async def test_the_hosts_token_is_made_once_private_and_names_the_actor(shop):
    env = Env(shop)
    control = await env.open()
    try:
        api = make_api(control, worker_credential=None, operator_token=None)
        token = shop / LOCAL_TOKEN
        assert stat.S_IMODE(token.stat().st_mode) == 0o600
        assert local_token(shop) == token.read_text().strip()  # read, never made again
        await control.new_task("Add a greeting", actor="ana")
        async with serving(api) as url, httpx.AsyncClient(base_url=url, timeout=30) as client:
            for path in ("/tasks", "/config", "/artifacts", "/events", "/audit"):
                assert (await client.get(path)).status_code == 401, path
            refused = await client.post("/tasks/T-1/cancel", json={"actor": "alice"})
            assert refused.status_code == 401
            assert (await control.task("T-1")).state is TaskState.RECEIVED
            cancelled = await client.post(
                "/tasks/T-1/cancel", json={"actor": "alice"}, headers=operator_headers(shop)
            )
            assert cancelled.status_code == 200
        [line] = control.audit.entries()
        # who decided is the credential's; what the body said stands beside it as a claim
        assert line.actor == f"{local_operator()} (claimed alice)"
    finally:
        await env.close()


def test_a_client_finds_its_token_in_a_file_before_the_environment(tmp_path, monkeypatch):
    monkeypatch.delenv("T25_OPERATOR_TOKEN", raising=False)
    monkeypatch.delenv(TOKEN_FILE_ENV, raising=False)
    assert operator_token(tmp_path) is None  # no serve of this checkout made one
    made = local_token(tmp_path)
    assert operator_token(tmp_path) == made
    monkeypatch.setenv("T25_OPERATOR_TOKEN", "from-the-environment")
    assert operator_token(tmp_path) == "from-the-environment"
    named = tmp_path / "my-token"
    named.write_text("from-a-file\n")
    monkeypatch.setenv(TOKEN_FILE_ENV, str(named))
    assert operator_token(tmp_path) == "from-a-file"
    given = tmp_path / "given"
    given.write_text("from-the-option\n")
    assert operator_token(tmp_path, given) == "from-the-option"


async def test_a_named_worker_is_revoked_by_removing_its_line(shop, tmp_path, monkeypatch):
    listed = tmp_path / "workers"
    secrets = {"build-1": "cred-build-1-0123456789", "build-2": "cred-build-2-0123456789"}
    lines = [f"{n} sha256:{hashlib.sha256(s.encode()).hexdigest()}" for n, s in secrets.items()]
    listed.write_text("\n".join(lines) + "\n")
    monkeypatch.setenv(WORKERS_ENV, str(listed))
    env = Env(shop)
    control = await env.open()
    try:
        api = make_api(control, worker_credential=None, operator_token=None)
        async with serving(api) as url, httpx.AsyncClient(base_url=url, timeout=30) as client:

            async def claim(name: str) -> int:
                auth = {**WORKER, "Authorization": f"Bearer {secrets[name]}"}
                answer = await client.post("/worker/claim", json={"worker": name}, headers=auth)
                return answer.status_code

            assert await claim("build-1") == 204 and await claim("build-2") == 204
            listed.write_text(lines[1] + "\n# build-1 revoked\n")
            os.utime(listed, ns=(1, 1))  # a change the next request sees, whatever the clock
            assert await claim("build-1") == 401
            assert await claim("build-2") == 204
    finally:
        await env.close()


async def test_a_completion_naming_another_agent_than_the_role_holds_is_refused(shop):
    env = Env(shop)
    control = await env.open()
    try:
        await control.new_task("Add a greeting", actor="ana")
        await control.enter(await control.task("T-1"), TaskState.SPEC, actor="t25")
        api = make_api(control, worker_credential=CREDENTIAL, operator_token=None)
        async with serving(api) as url, httpx.AsyncClient(base_url=url, timeout=30) as client:
            claim = (
                await client.post("/worker/claim", json={"worker": "w"}, headers=WORKER)
            ).json()
            forged = {
                "lease": claim["lease"],
                "report": {
                    "result": {"adapter": "claude", "model": "claude-opus-4", "final_text": "{}"}
                },
            }
            refused = await client.post("/worker/complete", json=forged, headers=WORKER)
            assert refused.status_code == 409, refused.text
            said = refused.json()["error"]
            assert "names adapter 'claude', which spec's chain does not hold (scripted)" in said
        run = await control.store.get_run(claim["lease"]["run_id"])
        assert run is not None and run.status.value == "running"  # nothing of it was kept
    finally:
        await env.close()


async def test_code_an_agent_wrote_meets_serve_without_a_credential_it_can_find(env, shop):
    # With the host's network (the explicit `network: shared`), a check running the agent's
    # code reaches serve's port; it finds no token (.factory/ is hidden, T25's environment
    # never passed) and every operator request is refused.
    control = await env.open(qa={"checks": [], "network": "shared"}, sandbox="auto")
    api = make_api(control, worker_credential=CREDENTIAL, operator_token=None)
    async with serving(api) as url:
        code = f"""
import json, os, urllib.request, urllib.error
said = {{}}
for name in ("T25_OPERATOR_TOKEN", "FACTORY_WORKER_CREDENTIAL"):
    said[name] = os.environ.get(name)
try:
    said["token-file"] = open({str(shop / LOCAL_TOKEN)!r}).read()
except OSError as exc:
    said["token-file"] = type(exc).__name__
for method, path, body in (("GET", "/tasks", None), ("POST", "/tasks/T-1/cancel", b"{{}}")):
    request = urllib.request.Request({url!r} + path, data=body, method=method,
                                     headers={{"Content-Type": "application/json"}})
    try:
        said[path] = urllib.request.urlopen(request, timeout=10).status
    except urllib.error.HTTPError as exc:
        said[path] = exc.code
print("SAID", json.dumps(said))
"""
        run = committed_check(shop, "check_serve.py", code)
        checks = [{"name": "serve", "run": run, "required": False}]
        control = await env.open(
            qa={"checks": checks, "network": "shared"}, sandbox={"network": "shared"}
        )
        task = await env.new()
        await env.work()
    reports = await control.store.list_artifacts(task_id=task.id)
    qa = next(a for a in reports if a.meta.kind.value == "qa_report")
    excerpt = json.loads((await control.store.get_artifact(qa.id))[1])["checks"][0]["excerpt"]
    said = json.loads(excerpt.split("SAID ", 1)[1].splitlines()[0])
    assert said["T25_OPERATOR_TOKEN"] is None and said["FACTORY_WORKER_CREDENTIAL"] is None
    assert said["token-file"] in ("FileNotFoundError", "PermissionError"), said
    assert said["/tasks"] == 401 and said["/tasks/T-1/cancel"] == 401, said
    assert [e.decision for e in control.audit.entries()] == []
