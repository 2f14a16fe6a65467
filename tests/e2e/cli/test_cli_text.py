"""Text from outside T25 on the real command line: refused at the door when it is filed,
escaped on the way out when it was stored before the door checked it, and never able to
stop `t25 run` for the other tasks."""

from __future__ import annotations

import sqlite3
from pathlib import Path

import pytest

from core.domain.text import MAX_DESCRIPTION, MAX_TITLE

ESC_TITLE = "evil \x1b]0;pwned\x07 title"
SCRIPTED = """\
projects: [{name: shop, repo: .}]
roles:
  spec: [{adapter: scripted}]
  planner: [{adapter: scripted}]
  dev: [{adapter: scripted}]
  qa: [{adapter: scripted}]
  reviewer: [{adapter: scripted, model: scripted-2}]  # not the dev's model
  docs: [{adapter: scripted}]
"""


def plant(repo: Path, task: str, **columns: str) -> None:
    """Write straight into the store, as data from before the door checked it would be."""
    db = sqlite3.connect(repo / ".factory" / "t25.db")
    try:
        with db:
            for column, value in columns.items():
                db.execute(
                    f"UPDATE tasks SET {column} = ? WHERE id = ?",
                    (value, int(task.removeprefix("T-"))),
                )
    finally:
        db.close()


@pytest.mark.parametrize(
    ("args", "said"),
    [
        ((ESC_TITLE,), "title holds a control character (U+001B at position 6)"),
        (("two\nlines",), "title holds a line break"),
        (("x" * (MAX_TITLE + 1),), f"title is {MAX_TITLE + 1:,} characters long"),
        (("   ",), "title cannot be empty"),
        (("fine", "--description", "bell \x07"), "description holds a control character"),
        (
            ("fine", "--description", "x" * (MAX_DESCRIPTION + 1)),
            f"description is {MAX_DESCRIPTION + 1:,} characters long",
        ),
    ],
)
def test_task_new_refuses_what_no_person_means_to_type(t25, args, said):
    assert t25("init").code == 0
    done = t25("task", "new", *args)
    assert done.code == 1 and said in done.err, done.err
    assert "\x1b" not in done.out + done.err and "\x07" not in done.out + done.err
    assert t25("task", "list").out.startswith("no tasks yet")


def test_a_multi_line_description_and_a_title_at_its_bound_are_filed(t25):
    assert t25("init").code == 0
    done = t25("task", "new", "t" * MAX_TITLE, "--description", "line one\n\tline two")
    assert done.code == 0, done.err
    assert "  about    line one\n" + " " * 11 + "\tline two\n" in t25("task", "show", "T-1").out


def test_old_titles_with_escape_sequences_are_escaped_on_the_way_out(t25, repo):
    assert t25("init").code == 0
    (repo / "t25.yaml").write_text(SCRIPTED)
    assert t25("task", "new", "placeholder").code == 0
    plant(
        repo,
        "T-1",
        title=ESC_TITLE,
        description="about \x1b[2J\nscripted: question=Which \x1b[31mcolour\x1b[0m?",
    )

    listed = t25("task", "list")
    shown = t25("task", "show", "T-1")
    ran = t25("run")
    for done in (listed, shown, ran):
        assert done.code == 0, done.err
        assert "\x1b" not in done.out and "\x07" not in done.out
    assert "evil \\x1b]0;pwned\\x07 title" in listed.out
    assert "evil \\x1b]0;pwned\\x07 title" in shown.out and "about \\x1b[2J" in shown.out
    assert "T-1  asks: Which \\x1b[31mcolour\\x1b[0m?" in ran.out
    assert "\x1b" not in t25("task", "show", "T-1").out  # now with runs and history too
    decided = t25("cancel", "T-1", "--reason", "not now")
    assert decided.code == 0, decided.err
    assert "\x1b" not in decided.out and "evil \\x1b]0;pwned\\x07 title" in decided.out


def test_a_title_past_every_bound_fails_its_own_task_and_the_run_goes_on(t25, repo):
    # 131,060 bytes: with the commit message around it, one argument over the kernel's
    # 128 KiB limit. Stored before titles were bounded, it must not stop the others.
    assert t25("init").code == 0
    (repo / "t25.yaml").write_text(SCRIPTED)
    assert t25("task", "new", "placeholder").code == 0
    assert t25("task", "new", "An ordinary task").code == 0
    plant(repo, "T-1", title="x" * 131_060)

    ran = t25("run")
    assert ran.code == 3, ran.err[-2000:]
    assert "unexpected error" not in ran.err and "Traceback" not in ran.err
    assert "T-2  DOCS → DONE" in ran.out
    assert "1 task(s) failed in this run: T-1" in ran.out
    failed = next(line for line in ran.out.splitlines() if "T-1  IMPLEMENTING → FAILED" in line)
    assert "git cannot be started: one of its arguments is 131,0" in failed
    assert "more than the system allows" in failed
