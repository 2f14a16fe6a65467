"""A worker and a `t25 serve` of different versions: each says its protocol, and a mismatch
ends in one line before anything is leased, never in a run claimed and left to lapse.

The previous release is built in the test from its commit (PREVIOUS) and run from that
tree with this interpreter and its libraries; the current one is this checkout. What no
release has sent yet (a claim of models this worker cannot read, a 426 after the claim) comes
from a small serve on loopback that answers as such a serve would.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import ClassVar

import httpx
import pytest

from core.domain.models import Lease, Run, Task, TaskState, utcnow
from t25_tui.api.protocol import PROTOCOL
from tests.support import CHECKOUT
from tests.support.operators import operator_headers
from tests.support.pipeline import write_config
from tests.support.serving import CREDENTIAL
from tests.support.waiting import answers, free_port, wait_until

PREVIOUS = "d496b1b"  # the last commit whose worker and serve said no protocol (version 1)
CHECKOUT = CHECKOUT


@pytest.fixture
def previous(tmp_path: Path) -> Path:
    """The previous release's tree, from its commit."""
    found = subprocess.run(
        ["git", "cat-file", "-e", f"{PREVIOUS}^{{commit}}"], cwd=CHECKOUT, capture_output=True
    )
    if found.returncode != 0:
        pytest.skip(f"this checkout has no commit {PREVIOUS} (a shallow clone?)")
    tree = tmp_path / "previous"
    tree.mkdir()
    archive = subprocess.run(
        ["git", "archive", PREVIOUS], cwd=CHECKOUT, capture_output=True, check=True
    )
    subprocess.run(["tar", "-x", "-C", str(tree)], input=archive.stdout, check=True)
    return tree


def _t25(shop: Path, args: list[str], *, tree: Path | None, log: Path) -> subprocess.Popen[bytes]:
    """`t25 ARGS` in `shop`, of `tree` (None: this checkout), its stderr to `log`."""
    env = {**os.environ, "FACTORY_WORKER_CREDENTIAL": CREDENTIAL}
    if tree is not None:
        env["PYTHONPATH"] = str(tree)
    with open(log, "wb") as err:
        return subprocess.Popen(
            [sys.executable, "-m", "t25_tui", *args],
            cwd=shop,
            env=env,
            stdin=subprocess.DEVNULL,
            stdout=subprocess.DEVNULL,
            stderr=err,
        )


def _stop(process: subprocess.Popen[bytes]) -> None:
    if process.poll() is None:
        process.send_signal(signal.SIGTERM)
        try:
            process.wait(timeout=30)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait(timeout=10)


@pytest.fixture
def serving(shop: Path, request: pytest.FixtureRequest) -> Iterator[tuple[str, httpx.Client]]:
    """A `t25 serve` of the tree the test asks for (`tree`: None is this checkout) and an
    operator's client of it, with one task filed and its first run queued."""
    write_config(shop)
    tree = request.getfixturevalue("previous") if request.param == "previous" else None
    port = free_port()
    serve = _t25(shop, ["serve", "--bind", f"127.0.0.1:{port}"], tree=tree, log=shop / "serve.err")
    url = f"http://127.0.0.1:{port}"
    try:
        wait_until(lambda: answers(url), what=lambda: (shop / "serve.err").read_text())
        with httpx.Client(base_url=url, timeout=10, headers=operator_headers(shop)) as client:
            assert client.post("/tasks", json={"title": "Across versions"}).status_code == 201
            wait_until(lambda: _first_run(client) is not None, what="the first run queued")
            yield url, client
    finally:
        _stop(serve)


def _first_run(client: httpx.Client) -> dict[str, object] | None:
    runs = client.get("/tasks/T-1").json()["runs"]
    return runs[0] if runs else None


def _exit_of(worker: subprocess.Popen[bytes]) -> int:
    try:
        return worker.wait(timeout=60)
    finally:
        _stop(worker)


@pytest.mark.parametrize("serving", ["current"], indirect=True)
def test_the_previous_worker_is_refused_before_a_lease_and_the_current_one_takes_the_run(
    shop, previous, serving
):
    url, client = serving
    old = _t25(shop, ["worker", "--url", url], tree=previous, log=shop / "old.err")
    assert _exit_of(old) == 1, (shop / "old.err").read_text()
    said = (shop / "old.err").read_text()
    assert f"this serve speaks protocol {PROTOCOL}, the worker 1: upgrade the worker" in said
    run = _first_run(client)
    assert run is not None and (run["status"], run["attempts"]) == ("queued", 0), run

    new = _t25(shop, ["worker", "--url", url], tree=None, log=shop / "new.err")
    try:
        wait_until(
            lambda: (_first_run(client) or {}).get("status") == "succeeded",
            timeout=90,
            what=lambda: f"{_first_run(client)}\n{(shop / 'new.err').read_text()}",
        )
        assert (_first_run(client) or {})["attempts"] == 1
    finally:
        _stop(new)
    assert new.returncode == 0
    health = client.get("/health").json()
    assert health["protocol"] == PROTOCOL and health["version"], health


@pytest.mark.parametrize("serving", ["previous"], indirect=True)
def test_the_current_worker_ends_in_one_line_against_the_previous_serve(shop, serving):
    url, client = serving
    worker = _t25(shop, ["worker", "--url", url], tree=None, log=shop / "worker.err")
    assert _exit_of(worker) == 1
    said = (shop / "worker.err").read_text()
    assert f"t25: error: serve speaks protocol 1, this worker {PROTOCOL}: upgrade serve" in said
    assert "Traceback" not in said and "hint" not in said, said
    run = _first_run(client)  # no agent ran: the run was never claimed
    assert run is not None and (run["status"], run["attempts"]) == ("queued", 0), run


class _NewerServe(BaseHTTPRequestHandler):
    """A serve of this protocol whose claim carries a Task field this worker does not know:
    what a worker met when a serve changed the models without saying so."""

    novel: ClassVar[dict[str, object]] = {"novel": 1}  # what the claim's task carries extra
    odd_lease: ClassVar[dict[str, object]] = {}  # what its lease carries extra
    refusal: ClassVar[str | None] = None  # what a call after the claim is answered with (426)
    released: ClassVar[list[dict[str, object]]] = []

    def do_GET(self) -> None:
        self._answer({"ok": True, "protocol": PROTOCOL, "version": "9.9.9", "last_event_id": 0})

    def do_POST(self) -> None:
        body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
        if self.path != "/worker/claim" and self.refusal:
            self._answer({"error": self.refusal, "hint": None, "code": "protocol_mismatch"}, 426)
            return
        if self.path == "/worker/release":
            self.released.append(body["lease"])
            self._answer({})
            return
        now = utcnow()
        lease = Lease(run_id="R-1", task_id="T-1", token=1, worker=body["worker"], expires_at=now)
        run = Run(id="R-1", task_id="T-1", stage=TaskState.SPEC, role="spec", enqueued_at=now)
        task = Task(
            id="T-1", project="shop", title="new", type="feat", created_at=now, state_since=now
        )
        self._answer(
            {
                "lease": {**lease.model_dump(mode="json"), **self.odd_lease},
                "run": run.model_dump(mode="json"),
                "task": {**task.model_dump(mode="json"), **self.novel},
                "authors": [],
                "resume": None,
            }
        )

    def _answer(self, body: dict[str, object], status: int = 200) -> None:
        data = json.dumps(body).encode()
        self.send_response(status)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def log_message(self, format: str, *args: object) -> None:
        pass


class _UpgradedServe(_NewerServe):
    """A serve upgraded under a running worker: the claim was taken, every call after it is
    refused as of another protocol."""

    novel: ClassVar[dict[str, object]] = {}
    refusal = (
        f"this serve speaks protocol {PROTOCOL + 1}, the worker {PROTOCOL}: upgrade the worker"
    )


class _OddLeaseServe(_NewerServe):
    """A serve whose lease this worker cannot read: a claim that fails where no T25 error
    is raised, a defect of the worker's as far as it can tell."""

    novel: ClassVar[dict[str, object]] = {}
    odd_lease: ClassVar[dict[str, object]] = {"novel": 1}


def _worker_against(shop: Path, fake: type[_NewerServe]) -> list[str]:
    """A worker process against `fake` on loopback, until it ends (exit 1): its stderr."""
    write_config(shop)
    server = ThreadingHTTPServer(("127.0.0.1", 0), fake)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        url = f"http://127.0.0.1:{server.server_address[1]}"
        worker = _t25(shop, ["worker", "--url", url], tree=None, log=shop / "worker.err")
        assert _exit_of(worker) == 1
    finally:
        server.shutdown()
        thread.join(timeout=10)
        server.server_close()
    return (shop / "worker.err").read_text().strip().splitlines()


def test_a_claim_the_worker_cannot_read_is_handed_back_and_ends_it_in_one_line(shop):
    said = _worker_against(shop, _NewerServe)
    assert said[-1] == (
        "t25: error: serve sent a claim this worker cannot read (novel: Extra inputs are not "
        "permitted); the run is handed back: upgrade this worker to serve's T25"
    ), said
    assert [lease["run_id"] for lease in _NewerServe.released] == ["R-1"]


def test_a_426_met_mid_run_ends_the_worker_in_one_line(shop):
    said = _worker_against(shop, _UpgradedServe)
    assert said[-1] == f"t25: error: {_UpgradedServe.refusal}", said
    assert not any("Traceback" in line for line in said), said


def test_a_worker_ended_by_a_defect_logs_its_traceback_and_exits_1(shop):
    said = _worker_against(shop, _OddLeaseServe)
    assert any(line.endswith("-r1 crashed; its process ends") for line in said), said
    assert "Traceback (most recent call last):" in said, said
    assert said[-1] == "  hint: run again with --debug for the traceback", said
