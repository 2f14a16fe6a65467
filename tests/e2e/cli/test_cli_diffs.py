"""`t25 diff`, `t25 show` and `t25 logs` as a person runs them: a real repository, a real
store, a task driven to DONE by the scripted agent."""

from __future__ import annotations

import json
import sqlite3

import pytest

from tests.support.pipeline import PIPELINE_CONFIG
from tests.support.shapes import conforms


@pytest.fixture
def done_task(t25, repo):
    """T-1, through the whole pipeline, waiting to be merged."""
    assert t25("init").code == 0
    (repo / "t25.yaml").write_text(PIPELINE_CONFIG)
    assert t25("task", "new", "Greeting").code == 0
    ran = t25("run")
    assert ran.code == 0, ran.err
    assert "T-1" in t25("task", "list", "--state", "DONE").out
    return "T-1"


def test_diff_prints_the_branch_against_the_default_branch_plain_when_piped(t25, done_task):
    whole = t25("diff", done_task)
    assert whole.code == 0, whole.err
    assert whole.out.startswith("diff --git a/")
    assert "\x1b[" not in whole.out
    assert "the whole branch" in whole.err

    stat = t25("diff", done_task, "--stat")
    assert stat.code == 0, stat.err
    assert " changed, " in stat.out.splitlines()[-1] and "insertion" in stat.out

    shape = json.loads(t25("diff", done_task, "--stat", "--json").out)
    assert set(shape) == {
        "task", "attempt", "attempts", "run", "source", "base", "tip", "files",
        "insertions", "deletions",
    }  # fmt: skip
    assert shape["task"] == "T-1" and shape["source"] == "git" and shape["attempt"] is None
    assert shape["files"] and set(shape["files"][0]) == {
        "path", "old_path", "insertions", "deletions", "binary",
    }  # fmt: skip
    assert shape["insertions"] == sum(f["insertions"] for f in shape["files"]) > 0
    assert all(f"b/{f['path']}" in whole.out for f in shape["files"])


def test_diff_of_one_attempt_and_of_an_attempt_that_never_was(t25, done_task):
    one = t25("diff", done_task, "--attempt", "1")
    assert one.code == 0, one.err
    assert one.out.startswith("diff --git a/") and "attempt 1 of 1 (R-" in one.err
    shape = json.loads(t25("diff", done_task, "--attempt", "1", "--json").out)
    assert shape["attempt"] == 1 and shape["run"].startswith("R-")
    missing = t25("diff", done_task, "--attempt", "2")
    assert missing.code == 1 and "no implementing attempt 2 (it has 1)" in missing.err


def test_diff_of_a_merged_task_is_still_its_change(t25, done_task):
    before = t25("diff", done_task).out
    assert t25("merge", done_task).code == 0
    assert t25("diff", done_task).out == before


def test_show_prints_an_artifact_and_refuses_one_whose_content_changed(t25, repo, done_task):
    listed = json.loads(t25("diff", done_task, "--json").out)
    assert listed["files"]
    shown = t25("show", "A-1")
    assert shown.code == 0, shown.err
    assert "verified" in shown.err and shown.out
    db = repo / ".factory" / "t25.db"
    con = sqlite3.connect(db)
    con.execute("UPDATE blobs SET content = ? WHERE rowid = 1", (b"tampered",))
    con.commit()
    con.close()
    damaged = t25("show", "A-1")
    assert damaged.code == 1
    assert damaged.err.startswith("t25: error: artifact A-1 is corrupted")
    assert "Traceback" not in damaged.err
    assert t25("show", "A-999").code == 1


def test_logs_are_readable_text_and_raw_on_request(t25, done_task):
    readable = t25("logs", done_task)
    assert readable.code == 0, readable.err
    assert '"type"' not in readable.out
    assert "· finished: success" in readable.out
    assert "→ write(" in readable.out  # the implementing run's tool call, with its argument
    assert "\x1b[" not in readable.out
    raw = t25("logs", done_task, "--raw")
    assert raw.code == 0 and '"type": "result"' in raw.out


def test_logs_as_json_lines_in_their_documented_shape(t25, done_task):
    shown = t25("logs", done_task, "--json")
    assert shown.code == 0, shown.err
    lines = [conforms("logs-line", text) for text in shown.out.splitlines()]
    starts = [line for line in lines if line["kind"] == "run_started"]
    ends = [line for line in lines if line["kind"] == "run_finished"]
    assert starts and {s["run_id"] for s in starts} <= {e["run_id"] for e in ends}
    assert {line["line"] for line in ends} == {"succeeded"}
    calls = [line for line in lines if line["kind"] == "call"]
    assert any(line["line"].startswith("write(") for line in calls), calls
    assert all(line["stream"] == "stdout" and line["run_id"] for line in calls)
    run = calls[0]["run_id"]
    one = [conforms("logs-line", text) for text in t25("logs", run, "--json").out.splitlines()]
    assert {line["run_id"] for line in one} == {run}
    assert one[0]["kind"] == "run_started"
    assert t25("logs", done_task, "--json", "--raw").code == 2  # one way of showing at a time


def test_on_a_terminal_the_diff_is_coloured_and_an_agents_escape_is_escaped():
    from core.domain.diffs import TaskDiff, files_of
    from t25_tui.cli.diff import coloured, stat_lines

    text = (
        "diff --git a/x.py b/x.py\n--- a/x.py\n+++ b/x.py\n@@ -1,2 +1,2 @@\n"
        " keep\n-old\n+new \x1b[2J\n"
    )
    shown = coloured(text)
    assert "\x1b[32m+new \\x1b[2J\x1b[0m" in shown and "\x1b[31m-old\x1b[0m" in shown
    assert "\x1b[2J" not in shown.replace("\\x1b[2J", "")
    diff = TaskDiff(task_id="T-1", files=files_of(text), text=text)
    assert stat_lines(diff) == [
        " x.py |     2 +-",
        " 1 file changed, 1 insertion(+), 1 deletion(-)",
    ]


def test_a_deleted_line_that_reads_like_a_header_is_counted_as_a_deletion():
    from core.domain.diffs import files_of

    text = (
        "diff --git a/a.md b/a.md\n--- a/a.md\n+++ b/a.md\n@@ -1,2 +1 @@\n"
        "--- not a header\n keep\n"
        "diff --git a/old.py b/new.py\nsimilarity index 90%\nrename from old.py\n"
        "rename to new.py\n"
    )
    first, renamed = files_of(text)
    assert (first.path, first.insertions, first.deletions) == ("a.md", 0, 1)
    assert (renamed.path, renamed.old_path) == ("new.py", "old.py")


def test_after_a_review_send_back_each_attempt_shows_only_its_own_change(t25, repo):
    assert t25("init").code == 0
    (repo / "t25.yaml").write_text(PIPELINE_CONFIG)
    assert t25("task", "new", "Twice", "--description", "scripted: review=changes-once").code == 0
    assert t25("run").code == 0
    first = json.loads(t25("diff", "T-1", "--attempt", "1", "--json").out)
    second = t25("diff", "T-1", "--attempt", "2")
    assert first["attempts"] == 2 and second.code == 0, second.err
    assert "+- T-1 round 2: scripted change" in second.out
    assert "round 1" not in "".join(
        line for line in second.out.splitlines() if line.startswith(("+", "-"))
    )
    whole = t25("diff", "T-1").out
    assert "round 1: scripted change" in whole and "round 2: scripted change" in whole
