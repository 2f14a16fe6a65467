"""The OpenAPI document of `t25 serve` says what it does: which credential each route takes,
every answer it can give, the bounds of every field. schemathesis holds a real `t25 serve`
to it, with and without credentials, with every check it has (`ignored_auth` among them),
and finds nothing."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
from pathlib import Path

import pytest

from t25_tui.api.protocol import HEADER as PROTOCOL_HEADER
from t25_tui.api.protocol import PROTOCOL
from t25_tui.api.server import make_api
from tests.support.backends import PostgresBackend
from tests.support.pipeline import Env, write_config
from tests.support.waiting import answers, free_port, wait_until

OPERATOR, WORKER = "op-token-31", "worker-credential-31"
SCHEMATHESIS = Path(sys.executable).with_name("schemathesis")
MAX_EXAMPLES = 12  # per operation and phase: bounded, and deterministic below


@pytest.mark.parametrize("token", [OPERATOR, None])
async def test_every_route_declares_its_credential_and_its_refusals(shop, token):
    env = Env(shop)
    control = await env.open()
    doc = make_api(control, worker_credential=WORKER, operator_token=token).openapi()
    await env.close()
    schemes = doc["components"]["securitySchemes"]
    assert schemes["workerCredential"] == {
        **schemes["workerCredential"],
        "type": "http",
        "scheme": "bearer",
    }
    assert "operatorToken" in schemes  # with or without a named token: the host's own
    for path, operations in doc["paths"].items():
        for method, op in operations.items():
            wanted = (
                [{"workerCredential": []}]
                if path.startswith("/worker/")
                else None
                if path == "/health"
                else [{"operatorToken": []}]
            )
            assert op.get("security") == wanted, (method, path)
            codes = set(op["responses"])
            assert {"408", "413", "422", "503"} <= codes, (method, path)
            assert ("401" in codes) is (wanted is not None), (method, path)
            for code, answer in op["responses"].items():
                if code.startswith("4"):
                    schema = answer["content"]["application/json"]["schema"]
                    assert schema == {"$ref": "#/components/schemas/ErrorBody"}


# Without credentials every answer is the admission check's, whatever the store: that run is on SQLite only.
@pytest.fixture(
    params=[
        pytest.param(("sqlite", True), id="sqlite-credentials"),
        pytest.param(("sqlite", False), id="sqlite-anonymous"),
        pytest.param(("postgres", True), id="postgres-credentials", marks=pytest.mark.postgres),
    ]
)
async def real_serve(request, shop):
    """`t25 serve` as a process, with an operator token and a worker credential; and whether
    schemathesis is to send them."""
    store, credentials = request.param
    env = {**os.environ, "T25_OPERATOR_TOKEN": OPERATOR, "FACTORY_WORKER_CREDENTIAL": WORKER}
    backend = None
    if store == "postgres":
        backend = PostgresBackend(request.getfixturevalue("pg_template"))
        await backend.create()
        env["T25_DATABASE_URL"] = backend.url
    write_config(shop)
    port = free_port()
    serve = subprocess.Popen(
        [sys.executable, "-m", "t25_tui", "serve", "--bind", f"127.0.0.1:{port}"],
        cwd=shop,
        env=env,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    url = f"http://127.0.0.1:{port}"
    try:
        wait_until(lambda: answers(url))
        yield url, credentials
    finally:
        serve.send_signal(signal.SIGTERM)
        serve.wait(timeout=30)
        if backend:
            await backend.drop()


def test_schemathesis_finds_nothing(real_serve, tmp_path):
    url, credentials = real_serve
    config = tmp_path / "schemathesis.toml"
    config.write_text(  # a worker says its protocol on every request, as T25's own does
        f'headers = {{ "{PROTOCOL_HEADER}" = "{PROTOCOL}" }}\n'
        f'[auth.openapi.operatorToken]\nbearer = "{OPERATOR}"\n'
        f'[auth.openapi.workerCredential]\nbearer = "{WORKER}"\n'
        if credentials
        else ""
    )
    done = subprocess.run(
        [
            str(SCHEMATHESIS),
            "--config-file",
            str(config),
            "--no-color",
            "run",
            f"{url}/openapi.json",
            "--checks",
            "all",
            "--max-examples",
            str(MAX_EXAMPLES),
            "--seed",
            "25",
            "--generation-deterministic",
            # /events answers a stream that never ends; tests/integration/serve/test_serve.py reads it.
            "--exclude-path",
            "/events",
            "--workers",
            "1",
            "--request-timeout",
            "10",
            "--max-failures",
            "20",
            # Without credentials every answer is the admission check's 401 whatever the input: the
            # coverage phase reaches every operation; fuzzing it again would find the same 401s.
            *(() if credentials else ("--phases", "coverage")),
        ],
        cwd=tmp_path,
        capture_output=True,
        text=True,
        # Under the per-test limit (600 s), so that a hang is named with its command; a loaded
        # machine took over 300 s for the run with credentials.
        timeout=540,
        stdin=subprocess.DEVNULL,
    )
    summary = done.stdout[-6000:]
    assert done.returncode == 0, summary
    assert " passed" in summary and "failure" not in summary.split("SUMMARY")[-1]
