"""Each test's kind, and `slow`, from the folder it lives in; the folders `-m` leaves out,
not collected; and the plugins that hold the shared fixtures (tests/support/)."""

from __future__ import annotations

import os
from pathlib import Path

import pytest
from _pytest.mark.expression import Expression  # what `-m` is compiled to (pytest pinned)

from tests.support.kinds import KINDS, SLOW_KINDS

# -- kinds, and slow tests -------------------------------------------------------------------
#
# A test's kind is the folder it lives in, and its mark is given here from that folder, so
# that no test module carries one:
#
# - unit: in this process; a small real repository or SQLite file at most;
# - contract: the store on each backend (real SQLite, a Postgres clone per test), the
#   adapters against each CLI's recorded output;
# - integration: programs started within the test: the scripted agent through the pipeline,
#   T25's git on real repositories (worktrees, the fingerprint, the undo, the push), the
#   sandbox, serve's API on a real server (and against its OpenAPI document), a Postgres
#   cluster of its own;
# - e2e: the real `t25` binary (the command line, `t25 serve` and remote workers as
#   programs, a terminal), the real agent CLIs, the cockpit.
#
# `slow` is integration and e2e: `pytest -m "not slow"` is the unit and contract tests, the
# quick loop (some 50 s of CPU time in all, most of it in two processes side by side); plain
# `pytest` and .ci/run run everything.

TESTS = Path(__file__).parent

# The fixtures every test may use, by name; their helpers are imported from these modules.
pytest_plugins = [
    "tests.support.repos",  # repo, t25, shop, env
    "tests.support.backends",  # the store on each backend: backend, store, pg_database, ...
    "tests.support.pg_cluster",  # a throwaway Postgres cluster: pg_cluster, cluster
    "tests.support.agent_kit",  # the echo CLI and the scripted agent: echo, scripted, ...
    "tests.support.cockpit",  # seeded
    "tests.support.serve_process",  # the real `t25 serve`: serve
    "tests.support.real_clis",  # the fake model server for the real CLIs: fake
]


def pytest_xdist_auto_num_workers(config: pytest.Config) -> int:
    """`pytest -n auto` runs twice as many test processes as there are cores, at most eight:
    a test spends most of its time waiting on the programs it starts (a serve, workers, agent
    CLIs, git), so two cores keep four busy: on two cores the whole suite took 30 min in one
    process, 21 in three and 17 in four."""
    return min(8, 2 * (os.cpu_count() or 1))


class _Undecided(Exception):
    """A mark `-m` names that a kind's folder does not decide (`postgres`, ...)."""

    def __init__(self, key: tuple[str, tuple[tuple[str, object], ...]]) -> None:
        self.key = key


Assumed = dict[tuple[str, tuple[tuple[str, object], ...]], bool]


def _matcher(decided: dict[str, bool], assumed: Assumed):  # pytest's MatcherCall
    def matcher(name: str, /, **kwargs: object) -> bool:
        if not kwargs and name in decided:
            return decided[name]
        key = (name, tuple(sorted(kwargs.items())))
        if key not in assumed:
            raise _Undecided(key)
        return assumed[key]

    return matcher


def _may_select(expression: Expression, decided: dict[str, bool]) -> bool:
    """Whether some test could match `expression`, knowing only the marks in `decided`: every
    other mark it names is tried both ways."""
    tries: list[Assumed] = [{}]
    while tries:
        assumed = tries.pop()
        try:
            if expression.evaluate(_matcher(decided, assumed)):
                return True
        except _Undecided as undecided:
            tries += [{**assumed, undecided.key: value} for value in (False, True)]
    return False


def pytest_ignore_collect(collection_path: Path, config: pytest.Config) -> bool | None:
    """A kind's folder that `-m` leaves out whole is not even collected: `-m "not slow"`
    imports no integration or e2e module (half the suite's collection, in each process)."""
    markexpr = config.option.markexpr
    kind = collection_path.name
    if not markexpr or collection_path.parent != TESTS or kind not in KINDS:
        return None
    decided = {name: name == kind for name in KINDS} | {"slow": kind in SLOW_KINDS}
    return None if _may_select(Expression.compile(markexpr), decided) else True


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    for item in items:
        where = item.path.relative_to(TESTS).as_posix()
        kind = where.split("/")[0]
        if kind not in KINDS:
            raise pytest.UsageError(f"tests/{where}: a test lives in tests/{{{','.join(KINDS)}}}/")
        item.add_marker(kind)
        if kind in SLOW_KINDS:
            item.add_marker(pytest.mark.slow)
    # Slow tests first, each group in its own order: run side by side (`-n`), the last tests
    # handed out are then quick ones, and no process is left alone with a minute-long test.
    items.sort(key=lambda item: item.get_closest_marker("slow") is None)
