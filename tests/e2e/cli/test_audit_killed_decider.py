"""A decider killed before its decision took effect leaves an audit line no one anchored;
T25 voids it (the next decision, or the next start of `t25 run`), the first line of a
fresh log like any other, and `t25 audit verify` passes again."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

from tests.support import CHECKOUT

ROOT = CHECKOUT


def _killed_while_deciding(repo: Path, verb: str, task: str) -> None:
    done = subprocess.run(
        [sys.executable, "-m", "tests.support.killed_decider", str(repo / "t25.yaml"), verb, task],
        cwd=ROOT,
        stdin=subprocess.DEVNULL,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == -9, done.stderr


def _lines(repo: Path) -> list[dict]:
    text = (repo / ".factory" / "audit.jsonl").read_text()
    return [json.loads(line) for line in text.splitlines()]


def test_the_first_line_of_a_fresh_log_is_voided_by_the_next_decision(t25, repo):
    assert t25("init").code == 0
    assert t25("task", "new", "a change").code == 0
    assert not (repo / ".factory" / "audit.jsonl").exists() or not _lines(repo)
    _killed_while_deciding(repo, "cancel", "T-1")
    assert [line["decision"] for line in _lines(repo)] == ["cancel"]  # never anchored

    before = t25("audit", "verify")
    assert before.code == 1 and "ok" not in before.out
    assert "voids its line" in before.err

    assert t25("cancel", "T-1", "--reason", "again").code == 0
    lines = _lines(repo)
    assert [(line["decision"], line.get("voids")) for line in lines] == [
        ("cancel", None),
        ("void", 1),
        ("cancel", None),
    ]
    assert "never anchored" in lines[1]["reason"]
    after = t25("audit", "verify")
    assert after.code == 0, after.err
    assert "ok: " in after.out and "3 entries, chain intact" in after.out


def test_the_next_start_voids_a_killed_deciders_line(t25, repo):
    assert t25("init").code == 0
    assert t25("task", "new", "a change").code == 0
    assert t25("cancel", "T-1").code == 0
    _killed_while_deciding(repo, "archive", "T-1")
    assert t25("audit", "verify").code == 1

    started = t25("run")  # nothing to move: it starts, settles the log and ends
    assert started.code == 0, started.err
    assert [(line["decision"], line.get("voids")) for line in _lines(repo)] == [
        ("cancel", None),
        ("archive", None),
        ("void", 2),
    ]
    after = t25("audit", "verify")
    assert after.code == 0, after.err
    assert "ok: " in after.out
