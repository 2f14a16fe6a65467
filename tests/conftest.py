"""Which tests are `slow`, and the plugins that hold the shared fixtures (tests/support/)."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

# -- slow tests ----------------------------------------------------------------------------
#
# A test is `slow` when it starts whole programs: the `t25` binary, `t25 serve` or a remote
# worker, an agent (the scripted agent or a real CLI), a Postgres cluster of its own, a
# terminal, the cockpit, or many git processes on real repositories (worktrees, the
# fingerprint, the undo, the push). `pytest -m "not slow"` is then the unit tests and the
# store's contract suite on both backends (real SQLite, a Postgres clone per test), in
# about half a minute; plain `pytest` and .ci/run still run everything. The marks are
# given here, from what a test uses and where it lives, so that no test module has to carry
# one and a new test that uses one of these fixtures is marked by itself.

SLOW_FIXTURES = frozenset(
    {
        "t25",  # the real binary
        "shop",  # the pipeline's sample project: the scripted agent runs in it
        "pg_cluster",  # a throwaway Postgres cluster, stopped and started for real
        "fake",  # the fake model server, for the real agent CLIs
    }
)
SLOW_MODULES = (
    "real_clis/",  # the real agent CLIs
    "tui/",  # the cockpit under Pilot (its workers run the scripted agent), and in a terminal
    "test_serve",  # a real uvicorn
    "test_web_cockpit.py",  # the cockpit in a real headless Chromium
    "test_rest_text.py",
    "test_remote_faults.py",
    "test_frozen_run.py",  # two `t25 run`s, one stopped past its lease
    "test_branch_guard.py",  # the pipeline a stage at a time, the branch moved between
    "test_merge_record.py",  # Postgres stopped under a merge
    "test_pipeline.py",  # tasks through the pipeline, with the scripted agent as a child process
    "test_figures_beside_the_default_branch.py",
    "test_check_figures.py",  # real pytest runs, read
    "test_sweeper.py",
    "test_decisions.py",
    "test_cli",  # the `t25` binary
    "test_startup.py",
    "test_audit_full_disk.py",
    "test_prompt_files.py",
    "test_stopped_children.py",  # agents that leave children behind
    "test_import_hygiene.py",  # fresh interpreters and lint-imports
    "test_held_secrets.py",  # the binary, and interpreters run as another user
    "test_wall_unprivileged.py",  # the wall's modules again, as another user
    "test_markers.py",  # pytest itself, collecting
    "adapters/test_adapter_process.py",  # agent processes under supervision
    "adapters/test_adapter_cli.py",
    "adapters/test_adapter_checks.py",
    "adapters/test_adapter_scripted_agent.py",
    "adapters/test_doctor.py",
    "store/test_store_faults.py",  # servers stopped, backends terminated
    "store/test_decisions_across_processes.py",
    "store/test_audit_across_processes.py",  # deciders killed, serves and the binary deciding
    # real repositories, worked by T25's git as a run would
    "test_worktrees.py",
    "test_git.py",
    "test_fingerprint.py",
    "test_watch.py",
    "test_publish.py",
    "test_repo_shapes.py",  # LFS, submodules, sparse checkouts: worktrees and the pipeline
    # a real project with its own virtual environment, its suite run by the checks
    "test_checks_see_the_change.py",
    "test_harness_is_protected.py",
)
TESTS = Path(__file__).parent

# The fixtures every test may use, by name; their helpers are imported from these modules.
pytest_plugins = [
    "tests.support.repos",  # repo, t25, shop, env
    "tests.support.backends",  # the store on each backend: backend, store, pg_template, ...
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


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    for item in items:
        where = item.path.relative_to(TESTS).as_posix()
        if SLOW_FIXTURES.intersection(getattr(item, "fixturenames", ())) or where.startswith(
            SLOW_MODULES
        ):
            item.add_marker(pytest.mark.slow)
    # Slow tests first, each group in its own order: run side by side (`-n`), the last tests
    # handed out are then quick ones, and no process is left alone with a minute-long test.
    items.sort(key=lambda item: item.get_closest_marker("slow") is None)
