"""T25's secrets out of reach, with the real binary: `t25` started with them in its environment
carries on without them there (the values held in memory, the process undumpable), no agent
finds them in its own or its ancestors' environment, and a value an agent or a QA check prints
is redacted in the streamed output (`t25 logs`) and nowhere in the store."""

from __future__ import annotations

import os
import shutil
import signal
import subprocess
import sys
import textwrap
from pathlib import Path

import httpx
import pytest

from core.workspace.git import git_sync
from t25_tui.api.protocol import HEADER as PROTOCOL_HEADER
from t25_tui.api.protocol import PROTOCOL
from tests.support import CHECKOUT
from tests.support.pipeline import SCRIPTED, write_config
from tests.support.waiting import answers, free_port, wait_until

ROOT = CHECKOUT
CMD = [sys.executable, "-m", "t25_tui"]
CREDENTIAL = "wc-held-7f3a9c2e41"
TOKEN = "op-held-5b8d0e6f93"
WORKER_MARK = "[t25: redacted FACTORY_WORKER_CREDENTIAL]"


def environ_of(pid: int) -> bytes:
    return Path(f"/proc/{pid}/environ").read_bytes()


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="/proc is Linux's")
def test_serve_holds_its_secrets_out_of_its_environment_and_still_uses_them(shop, tmp_path):
    write_config(shop)
    store = tmp_path / "held-store.db"
    secrets = {
        "FACTORY_WORKER_CREDENTIAL": CREDENTIAL,
        "T25_OPERATOR_TOKEN": TOKEN,
        "T25_DATABASE_URL": f"sqlite:///{store}",
    }
    port = free_port()
    serve = subprocess.Popen(
        [*CMD, "serve", "--bind", f"127.0.0.1:{port}"],
        cwd=shop,
        env={**os.environ, **secrets},
        stdin=subprocess.DEVNULL,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
    )
    url = f"http://127.0.0.1:{port}"
    try:
        wait_until(lambda: serve.poll() is not None or answers(url), what="serve answering")
        assert serve.poll() is None
        environ = environ_of(serve.pid)  # the same process: executed again, not forked
        for name, value in secrets.items():
            assert value.encode() not in environ and f"{name}=".encode() not in environ
        assert b"T25_HELD_SECRETS_FD=" in environ
        # ... and the values are in use: the operator token, the credential, the store URL.
        assert httpx.get(f"{url}/tasks", timeout=5).status_code == 401
        operator = {"Authorization": f"Bearer {TOKEN}"}
        assert httpx.get(f"{url}/tasks", headers=operator, timeout=5).status_code == 200
        worker = {"Authorization": f"Bearer {CREDENTIAL}", PROTOCOL_HEADER: str(PROTOCOL)}
        claim = httpx.post(f"{url}/worker/claim", headers=worker, json={}, timeout=5)
        assert claim.status_code not in (401, 503), claim.text
        assert store.exists()
    finally:
        serve.send_signal(signal.SIGTERM)
        _, err = serve.communicate(timeout=30)
    assert "FACTORY_WORKER_CREDENTIAL is not set" not in err.decode()


_WAITING = textwrap.dedent(
    """
    import sys
    sys.path.insert(0, sys.argv[1])
    from core.config import held_secrets
    made = held_secrets.undumpable() if sys.argv[2] == "undumpable" else False
    print(made, flush=True)
    sys.stdin.read()
    """
)


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="PR_SET_DUMPABLE is Linux's")
@pytest.mark.parametrize("made", ["undumpable", "as started"])
def test_an_undumpable_process_hides_its_environment_from_its_own_user(made):
    # Root may read any process's environment, so as root both sides run as `nobody`, with an
    # interpreter `nobody` may run (the module needs nothing beyond the standard library).
    user: dict[str, int] = {}
    python = sys.executable
    if os.geteuid() == 0:
        user = {"user": 65534}
        python = shutil.which("python3", path="/usr/local/bin:/usr/bin:/bin") or ""
        if not python or subprocess.run([python, "-c", ""], check=False, **user).returncode:
            pytest.skip("no interpreter that the user nobody may run")
    held = subprocess.Popen(
        [python, "-c", _WAITING, str(ROOT), made],
        env={**os.environ, "SOME_VARIABLE": "visible-unless-undumpable"},
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        text=True,
        cwd="/",
        **user,
    )
    try:
        assert held.stdout is not None
        assert held.stdout.readline().strip() == str(made == "undumpable")
        reader = subprocess.run(
            [python, "-c", f"print(open('/proc/{held.pid}/environ', 'rb').read())"],
            capture_output=True,
            text=True,
            cwd="/",
            timeout=30,
            **user,
        )
    finally:
        held.communicate("", timeout=30)
    if made == "undumpable":
        assert reader.returncode != 0 and "PermissionError" in reader.stderr
    else:
        assert reader.returncode == 0 and "visible-unless-undumpable" in reader.stdout


@pytest.mark.parametrize("mode", ["auto", "none"], ids=["sandboxed-where-it-can", "unconfined"])
def test_no_agent_finds_a_secret_and_one_it_prints_is_redacted_everywhere(t25, shop, mode):
    leaked = "leaked-credential.txt"  # a copy a careless operator committed (the worktree has it)
    (shop / leaked).write_text(CREDENTIAL + "\n")
    git_sync("add", leaked, cwd=shop)
    git_sync("commit", "-q", "-m", "oops", cwd=shop)
    printing = [sys.executable, "-c", f"print('check saw', open({leaked!r}).read())"]
    dev = {**SCRIPTED, "args": ["--misbehave", "environ", "--misbehave", f"print-file:{leaked}"]}
    write_config(
        shop,
        sandbox={"mode": mode},
        roles={"dev": [dev]},
        qa={
            "checks": [
                {"name": "unit", "run": [sys.executable, "-m", "unittest", "-q"]},
                {"name": "printing", "run": printing, "required": False},
            ]
        },
    )
    secrets = {"FACTORY_WORKER_CREDENTIAL": CREDENTIAL, "T25_OPERATOR_TOKEN": TOKEN}
    assert t25("task", "new", "Add rate limiting", cwd=shop).code == 0
    ran = t25("run", cwd=shop, env=secrets)
    assert ran.code == 0, ran.err

    logs = t25("logs", "T-1", cwd=shop)
    shown = logs.out + logs.err
    assert logs.code == 0 and "environ: ancestors" in shown
    assert "found no T25 secret" in shown  # not in its environment, nor in T25's
    assert CREDENTIAL not in shown and TOKEN not in shown
    assert f"{leaked} holds {WORKER_MARK}" in logs.out  # the agent's event
    assert f"{leaked}: {WORKER_MARK}" in logs.err  # its stderr, written in two pieces

    state = shop / ".factory"  # the store and the audit log; not the worktrees, which hold the file
    kept = b"".join(
        path.read_bytes()
        for path in state.rglob("*")
        if path.is_file() and "worktrees" not in path.relative_to(state).parts
    )
    assert CREDENTIAL.encode() not in kept and TOKEN.encode() not in kept
    assert kept.count(WORKER_MARK.encode()) >= 2  # the run's stored log, the check's excerpt
    shown = t25("task", "show", "T-1", cwd=shop).out
    assert CREDENTIAL not in shown
