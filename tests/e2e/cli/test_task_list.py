"""`t25 task list`: the tasks still in the pipeline and a count of the finished ones, unless
`--all` or `--state` asks for them; pages with `--limit` and `--after`, in text and in JSON.
Each is checked on both of the command's paths: the default store read with the standard
library (store.quick) and the control plane (taken for `--project`)."""

from __future__ import annotations

import sqlite3

import pytest

from core.control import task_lists
from core.domain.models import TaskState as S
from store.quick import FINISHED, UNFINISHED
from tests.support.shapes import conforms

PATHS = {"quick": (), "control plane": ("--project", "app")}


@pytest.fixture
def five(t25, repo):
    """Five tasks filed; T-2, T-3 and T-5 cancelled, T-5 then archived."""
    assert t25("init").code == 0
    for title in ("One", "Two", "Three", "Four", "Five"):
        assert t25("task", "new", title).code == 0
    for ref in ("T-2", "T-3", "T-5"):
        assert t25("cancel", ref, "--reason", "not now").code == 0
    assert t25("archive", "T-5").code == 0
    return repo


def ids(text: str) -> list[str]:
    return [line.split()[0] for line in text.splitlines() if line.startswith("T-")]


@pytest.mark.parametrize("path", PATHS.values(), ids=PATHS.keys())
def test_the_list_shows_the_unfinished_tasks_and_counts_the_finished_ones(t25, five, path):
    listed = t25("task", "list", *path)
    assert listed.code == 0, listed.err
    assert ids(listed.out) == ["T-1", "T-4"]
    assert listed.out.splitlines()[-1] == "and 2 CANCELLED (t25 task list --all lists them)"

    every = t25("task", "list", "--all", *path).out
    assert ids(every) == ["T-1", "T-2", "T-3", "T-4", "T-5"] and "and " not in every
    cancelled = t25("task", "list", "--state", "CANCELLED", *path).out
    assert ids(cancelled) == ["T-2", "T-3"]


@pytest.mark.parametrize("path", PATHS.values(), ids=PATHS.keys())
def test_a_page_says_where_the_next_one_starts_and_the_last_says_nothing(t25, five, path):
    first = t25("task", "list", "--all", "--limit", "2", *path).out
    assert ids(first) == ["T-1", "T-2"]
    assert first.splitlines()[-1] == "more after T-2: t25 task list --after T-2"
    second = t25("task", "list", "--all", "--limit", "2", "--after", "T-2", *path).out
    assert ids(second) == ["T-3", "T-4"]
    last = t25("task", "list", "--all", "--limit", "2", "--after", "4", *path).out
    assert ids(last) == ["T-5"] and "more after" not in last
    assert t25("task", "list", "--all", "--after", "T-5", *path).out == "no tasks match\n"


def test_json_pages_through_every_task_and_counts_what_it_left_out(t25, five):
    page = conforms("task-list", t25("task", "list", "--all", "--json", "--limit", "3").out)
    assert [t["id"] for t in page["tasks"]] == ["T-1", "T-2", "T-3"]
    assert page["next"] == "T-3" and page["finished"] == {}
    rest = t25("task", "list", "--all", "--json", "--limit", "3", "--after", page["next"])
    page = conforms("task-list", rest.out)
    assert [t["id"] for t in page["tasks"]] == ["T-4", "T-5"] and page["next"] is None

    active = conforms("task-list", t25("task", "list", "--json").out)
    assert [t["id"] for t in active["tasks"]] == ["T-1", "T-4"]
    assert active["finished"] == {"CANCELLED": 2} and active["next"] is None


def test_nothing_left_to_do_says_so_and_what_finished(t25, repo):
    assert t25("init").code == 0
    assert t25("task", "new", "Only").code == 0
    assert t25("cancel", "T-1", "--reason", "not now").code == 0
    listed = t25("task", "list").out.splitlines()
    assert listed == ["no task left to do", "and 1 CANCELLED (t25 task list --all lists them)"]


@pytest.mark.parametrize("bad", ["0", "-3", "many"])
def test_a_limit_below_one_is_refused_with_what_it_takes(t25, five, bad):
    done = t25("task", "list", "--limit", bad)
    assert done.code == 2 and "--limit" in done.err and "at least 1" in done.err


def test_the_quick_read_finishes_the_tasks_the_control_plane_finishes():
    """store.quick's SQL condition, evaluated on every state merged or not, against
    core.control.task_lists.FINISHED."""
    db = sqlite3.connect(":memory:")
    db.execute("CREATE TABLE tasks (state TEXT, merged INTEGER)")
    db.executemany("INSERT INTO tasks VALUES (?, ?)", [(s.value, m) for s in S for m in (0, 1)])
    found = set(db.execute(f"SELECT state, merged FROM tasks WHERE {FINISHED}"))
    others = set(db.execute(f"SELECT state, merged FROM tasks WHERE {UNFINISHED}"))
    assert not found & others and len(found | others) == 2 * len(S)  # each task is one or other
    expected = {
        (state.value, m)
        for state, merged in task_lists.FINISHED.items()
        for m in (0, 1)
        if merged is None or m == merged
    }
    assert found == expected == {("CANCELLED", 0), ("CANCELLED", 1), ("DONE", 1)}
