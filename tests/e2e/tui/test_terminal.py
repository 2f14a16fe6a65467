"""The real `t25 tui` binary in a pseudo-terminal: keys in, screen out, and a dropped line."""

from __future__ import annotations

import os
import signal
import sqlite3
import subprocess
import time
from pathlib import Path

import pytest

from t25_tui.cli.demo import DEMO_CONFIG
from tests.support.operators import operator_headers
from tests.support.terminal import T25, Terminal, make_sample_checkout, t25_as_operator


def db(repo: Path, sql: str) -> list[tuple]:
    with sqlite3.connect(repo / ".factory" / "t25.db") as conn:
        return conn.execute(sql).fetchall()


def wait(condition, timeout: float = 60.0) -> None:
    end = time.monotonic() + timeout
    while not condition():
        assert time.monotonic() < end, "condition not met in time"
        time.sleep(0.1)


def test_operator_approves_over_a_terminal(tmp_path):
    repo = make_sample_checkout(tmp_path / "shop", DEMO_CONFIG)
    t25_as_operator(
        repo,
        "task",
        "new",
        "Rotate the session signing key",
        "--description",
        "scripted: risk=high",
    )
    term = Terminal(repo, size=(100, 30))
    try:
        term.wait_for("APPROVE 1", timeout=90)
        term.type("i")
        term.wait_for("Waiting for you: 1")  # the inbox has loaded its row
        term.type("a")
        term.wait_for("Approve the plan of T-1")
        term.type("a")
        wait(
            lambda: (
                db(repo, "SELECT state FROM tasks WHERE id = 1")[0][0] not in ("AWAITING_APPROVAL",)
            )
        )
        term.type("q")
        assert term.wait_exit() == 0
    finally:
        term.kill()
    assert "approve" in t25_as_operator(repo, "audit")
    assert "ssh-operator" in t25_as_operator(repo, "audit")


def _agents_in(repo: Path) -> list[int]:
    pids = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            cmd = (entry / "cmdline").read_bytes()
            cwd = os.readlink(entry / "cwd")
        except OSError:
            continue
        if b"scripted" in cmd and b"hang" in cmd and cwd.startswith(str(repo)):
            pids.append(int(entry.name))
    return pids


@pytest.mark.parametrize("how", ["hangup"])
def test_a_dropped_terminal_stops_agents_and_hands_runs_back(tmp_path, how):
    config = DEMO_CONFIG.replace(
        "spec: [{adapter: scripted}]", "spec: [{adapter: scripted, args: [--misbehave, hang]}]"
    )
    repo = make_sample_checkout(tmp_path / "shop", config)
    t25_as_operator(repo, "task", "new", "Add a greeting endpoint")
    term = Terminal(repo)
    try:
        term.wait_for("WORKING 1", timeout=60)
        wait(lambda: _agents_in(repo), timeout=60)
        assert db(repo, "SELECT status FROM runs")[-1][0] == "running"
        term.hang_up()
        assert term.wait_exit(timeout=30) is not None, "t25 tui kept running without a terminal"
    finally:
        term.kill()
    wait(lambda: not _agents_in(repo), timeout=10)
    ((status, _worker),) = db(repo, "SELECT status, worker FROM runs")
    assert status == "queued"  # handed back: the next worker picks it up, nothing is lost
    assert db(repo, "SELECT state FROM tasks") == [("SPEC",)]
    assert "SPEC" in t25_as_operator(repo, "task", "list")


def test_the_readme_demo_opens_the_cockpit_with_tasks_flowing(tmp_path):
    term = Terminal(
        tmp_path, "--tui", "--dir", str(tmp_path / "shop"), command="demo", size=(120, 36)
    )
    try:
        term.wait_for("APPROVE 1", timeout=120)  # the high-risk plan waits for a human
        term.type("q")
        assert term.wait_exit() == 0
    finally:
        term.kill()
    assert (tmp_path / "shop" / ".factory" / "t25.db").exists()


def test_the_cockpit_can_serve_the_control_plane_for_remote_workers(tmp_path):
    import socket

    import httpx

    repo = make_sample_checkout(tmp_path / "shop", DEMO_CONFIG)
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    term = Terminal(repo, "--serve", f"127.0.0.1:{port}", "--no-workers", size=(100, 30))
    try:
        term.wait_for("RECEIVED", timeout=60)
        made = httpx.post(
            f"http://127.0.0.1:{port}/tasks",
            json={"title": "From afar"},
            timeout=10,
            headers=operator_headers(repo),  # the cockpit's serve made its host's token
        )
        assert made.status_code == 201
        term.wait_for("From afar", timeout=30)  # the cockpit sees what arrived over REST
        term.type("q")
        assert term.wait_exit() == 0
    finally:
        term.kill()
    with pytest.raises(httpx.HTTPError):
        httpx.get(f"http://127.0.0.1:{port}/health", timeout=2)


def test_an_operator_attaches_to_a_remote_serve_and_approves(tmp_path, monkeypatch):
    """`t25 tui --url` from a directory with no t25.yaml: reads, the approval and the event
    stream all cross HTTP; stopping serve under it ends its stream and the cockpit says so."""
    import socket

    import httpx

    repo = make_sample_checkout(tmp_path / "shop", DEMO_CONFIG)
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        url = f"http://127.0.0.1:{s.getsockname()[1]}"
    monkeypatch.setenv("T25_OPERATOR_TOKEN", "op-token-9")
    serve = subprocess.Popen(
        [str(T25), "serve", "--bind", url.removeprefix("http://"), "--workers", "1"],
        cwd=repo,
        stdin=subprocess.DEVNULL,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    api = httpx.Client(base_url=url, timeout=10, headers={"Authorization": "Bearer op-token-9"})
    laptop = tmp_path / "laptop"
    laptop.mkdir()
    term = None
    try:
        wait(lambda: _answers(api), timeout=30)
        api.post(
            "/tasks",
            json={"title": "Rotate the session signing key", "description": "scripted: risk=high"},
        ).raise_for_status()
        term = Terminal(laptop, "--url", url, size=(110, 30))
        term.wait_for("APPROVE 1", timeout=90)
        assert f"attached to {url}" in term.text()
        term.type("i")
        term.wait_for("Waiting for you: 1")
        term.type("a")
        term.wait_for("Approve the plan of T-1")
        term.type("a")
        wait(lambda: api.get("/tasks/T-1").json()["task"]["state"] != "AWAITING_APPROVAL")
        serve.send_signal(signal.SIGTERM)  # its event stream to the cockpit ends with it,
        serve.wait(timeout=20)  # rather than holding the shutdown open
        term.type("b")
        term.wait_for(f"reconnecting to {url}", timeout=20)
        term.type("q")
        assert term.wait_exit() == 0
    finally:
        if term:
            term.kill()
        serve.kill()
        api.close()
    audit = t25_as_operator(repo, "audit")
    assert "approve" in audit and "ssh-operator" in audit


def _answers(client) -> bool:
    import httpx

    try:
        return client.get("/health").status_code == 200
    except httpx.HTTPError:
        return False


def test_a_title_with_escape_sequences_never_reaches_the_terminal_raw(tmp_path):
    """A title stored before T25 checked text at the door, holding an OSC that retitles
    the terminal window, a clear-screen and Rich markup: the real cockpit draws it as
    visible escapes and literal brackets, and none of its bytes act on the terminal."""
    repo = make_sample_checkout(tmp_path / "shop", DEMO_CONFIG)
    t25_as_operator(repo, "task", "new", "placeholder")
    title = "\x1b]0;pwned\x07\x1b[2J[red]x[/] footer"
    with sqlite3.connect(repo / ".factory" / "t25.db") as conn:
        conn.execute("UPDATE tasks SET title = ? WHERE id = 1", (title,))
    term = Terminal(repo, "--no-workers", size=(120, 30))
    drawn = b""  # every byte the cockpit wrote (`type` starts a new screenful)
    try:
        term.wait_for("RECEIVED 1", timeout=60)
        assert "\\x1b]0;pwned" in term.text()  # the card
        drawn += term.raw
        term.type("\r")  # the detail: the whole title in its head
        term.wait_for("\\x1b]0;pwned\\x07\\x1b[2J[red]x[/] footer", timeout=30)
        drawn += term.raw
        term.type("q")
        assert term.wait_exit() == 0
        drawn += term.raw
    finally:
        term.kill()
    # Every "pwned" the cockpit wrote is the visible, escaped form; none follows a real ESC.
    assert b"\\x1b]0;pwned\\x07" in drawn
    assert drawn.count(b"pwned") == drawn.count(b"\\x1b]0;pwned\\x07")
    assert b"\x1b]0;pwned" not in drawn and b"\x1b[2J[red]" not in drawn
