"""A `t25 run` frozen past its lease while its agent finishes commits nothing.

Two real `t25 run` processes on one checkout: the first is stopped (SIGSTOP, as Ctrl-Z
does; outside a write to the store) while its agent, held at a gate, is let go and finishes;
its lease lapses (the 30 s of `t25 run`), the second takes the run and waits for the
worktree; the first is continued. It confirms its lease before committing, finds the run
another's, and commits nothing: the branch holds the change once and nothing was set aside.
Before, it committed on waking and the second attempt made the change again on top.
"""

from __future__ import annotations

import signal
import subprocess
from pathlib import Path

from core.workspace.git import git_sync
from tests.support.pipeline import write_config
from tests.support.runs import T25, freeze, runs, start_run, until


def _dev(shop: Path):
    return next(((r, started) for r, started in runs(shop) if r.role == "dev"), (None, []))


def test_a_run_process_frozen_past_its_lease_while_its_agent_finishes_commits_nothing(
    shop, tmp_path
):
    write_config(shop)
    subprocess.run(
        [*T25, "task", "new", "Frozen", "--description", "scripted: wait=go"],
        cwd=shop, check=True, capture_output=True, timeout=60,
    )  # fmt: skip
    tree = shop / ".factory" / "worktrees" / "T-1"
    log = tmp_path / "runs.log"
    frozen = start_run(shop, log)
    rescuer: subprocess.Popen[bytes] | None = None
    try:
        until(lambda: (tree / "go.started").exists(), "the first attempt's agent")
        freeze(frozen, shop)
        (tree / "go").write_text("")  # its agent finishes while its `t25 run` is stopped
        until(lambda: not (tree / "go").exists(), "the first agent's end")
        rescuer = start_run(shop, log)
        until(lambda: _dev(shop)[0].attempts == 2, "the lapsed run taken by the second")
        frozen.send_signal(signal.SIGCONT)
        until(lambda: (tree / "go.started").exists(), "the second attempt's agent")
        (tree / "go").write_text("")
        until(lambda: rescuer.poll() is not None and frozen.poll() is not None, "both done")
    finally:
        for p in (frozen, rescuer):
            if p is not None and p.poll() is None:
                p.send_signal(signal.SIGCONT)
                p.kill()
                p.wait(timeout=30)
    dev, started = _dev(shop)
    assert dev.attempts == 2 and started == [1, 2], log.read_text()
    text = git_sync("show", "feat/T-1:changes/T-1.md", cwd=shop)
    assert len([line for line in text.splitlines() if "scripted change" in line]) == 1
    archived = git_sync("for-each-ref", "--format=%(refname)", "refs/t25/archive/", cwd=shop)
    assert archived == "", "the frozen attempt reached the branch"
