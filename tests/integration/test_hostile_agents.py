"""An agent's output cannot stop T25 nor act on the operator's terminal.

A stage answer nested 200,000 deep fails its own task with the reason while another task
completes; `t25 logs` shows such output as text. What an agent printed to take over a
terminal (a clipboard write, a title, tmux passthrough, CSI) reaches the real `t25 logs
--raw` and `--log` on a pseudo-terminal escaped, and a pipe byte-exact."""

from __future__ import annotations

import json
import os
import pty
import select
import subprocess
import sys
import time
from pathlib import Path

from adapters.scripted_agent import TERMINAL_SEQUENCES
from core.domain.models import RunStatus, TaskState
from tests.support.repos import make_repo

DEPTH = 200_000
T25 = Path(sys.executable).with_name("t25")
REFUSED = f"nested {DEPTH:,} levels deep; at most 100 are read"


def config(planner_args: list[str]) -> str:
    return f"""\
projects: [{{name: shop, repo: .}}]
roles:
  spec: [{{adapter: scripted}}]
  planner: [{{adapter: scripted, args: {planner_args}}}]
  dev: [{{adapter: scripted}}]
  qa: [{{adapter: scripted}}]
  reviewer: [{{adapter: scripted, model: scripted-2}}]
  docs: [{{adapter: scripted}}]
"""


async def test_an_answer_nested_200000_deep_fails_its_task_and_the_other_task_completes(
    env, tmp_path
):
    hostile = make_repo(tmp_path / "hostile", branch="trunk")
    nested = {"adapter": "scripted", "args": ["--misbehave", f"nested:{DEPTH}"]}
    control = await env.open(
        projects=[
            {"name": "shop", "repo": "."},
            {"name": "hostile", "repo": str(hostile), "roles": {"planner": [nested]}},
        ]
    )
    deep = await control.new_task("Deep", actor="ana", project="hostile")
    plain = await control.new_task("Plain", actor="ana", project="shop")
    await env.work()

    assert (await env.task(plain.id)).state is TaskState.DONE
    failed = await env.task(deep.id)
    assert failed.state is TaskState.FAILED
    plan = [r for r in await control.store.list_runs(task_id=deep.id) if r.role == "planner"]
    assert [r.status for r in plan] == [RunStatus.SUCCEEDED]  # the agent ran; its answer failed
    assert failed.error == (
        f"PLAN run {plan[0].id}: the answer did not parse: PLAN output: the JSON in the final "
        f"message is {REFUSED} (the raw output is kept in the run's log)"
    )


def test_t25_run_and_logs_carry_on_past_output_nested_200000_deep(t25, repo):
    assert t25("init").code == 0
    (repo / "t25.yaml").write_text(config(["--misbehave", f"nested:{DEPTH}"]))
    t25("task", "new", "Deep")
    ran = t25("run")
    assert ran.code == 3, ran.err  # a task failed; the run itself went to its end
    assert "T-1  PLAN → FAILED" in ran.out and REFUSED in ran.out

    for how in ([], ["--json"], ["--raw"]):
        shown = t25("logs", "T-1", *how)
        assert shown.code == 0, shown.err
        assert "[" * 1000 in shown.out  # the event line, as the text it is
    assert "Working on PLAN for T-1" in t25("logs", "T-1").out


def on_a_terminal(cwd: Path, *args: str) -> tuple[int, bytes]:
    """Run the real `t25` with its stdout and stderr on a pseudo-terminal; all it wrote."""
    controller, terminal = pty.openpty()
    child = subprocess.Popen(
        [str(T25), *args], cwd=cwd, stdin=subprocess.DEVNULL, stdout=terminal, stderr=terminal
    )
    os.close(terminal)
    shown, deadline = b"", time.monotonic() + 120
    try:
        while time.monotonic() < deadline:
            ready, _, _ = select.select([controller], [], [], 1)
            if not ready:
                continue
            try:
                chunk = os.read(controller, 65536)
            except OSError:  # EIO: every writer of the terminal has closed it
                break
            if not chunk:
                break
            shown += chunk
        return child.wait(timeout=60), shown
    finally:
        os.close(controller)


def test_logs_raw_and_log_escape_an_agents_control_sequences_on_a_terminal_only(t25, repo):
    assert t25("init").code == 0
    (repo / "t25.yaml").write_text(config(["--misbehave", "terminal"]))
    t25("task", "new", "Sequences")
    assert t25("run").code == 0
    raw = TERMINAL_SEQUENCES.encode()
    runs = json.loads(t25("task", "show", "T-1", "--json").out)["runs"]
    plan_run = next(r["id"] for r in runs if r["role"] == "planner")

    piped = subprocess.run(
        [str(T25), "logs", plan_run, "--raw"], cwd=repo, capture_output=True, timeout=120
    )
    assert piped.returncode == 0
    assert b"terminal: " + raw + b"\n" in piped.stdout  # byte-exact when piped
    assert b"terminal: " + raw + b"\n" in piped.stderr
    stored = subprocess.run(
        [str(T25), "logs", plan_run, "--log"], cwd=repo, capture_output=True, timeout=120
    )
    assert stored.returncode == 0 and b"terminal: " + raw + b"\n" in stored.stdout

    for how in ("--raw", "--log", None):
        code, shown = on_a_terminal(repo, "logs", plan_run, *([how] if how else []))
        assert code == 0, shown
        lines = shown.decode().replace("\r\n", "\n")
        if how is None:  # the readable transcript colours its lines: T25's own SGR only
            lines = lines.replace("\x1b[2m", "").replace("\x1b[31m", "").replace("\x1b[0m", "")
        assert "terminal: \\x1b]52;c;cm0gLXJmIH4K\\x07\\x1b]0;pwned" in lines
        assert "\\x1bPtmux;" in lines and "\\x1b[2J" in lines and "\\x9b31m" in lines
        unsafe = [c for c in lines if c not in "\n\t" and (ord(c) < 0x20 or 0x7F <= ord(c) < 0xA0)]
        assert unsafe == [], f"{how}: {unsafe[:5]}"
