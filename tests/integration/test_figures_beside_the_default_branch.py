"""A change's test figures beside the default branch's: a first task's merge keeps what its
trial checks' pytest reported on the merge commit; a second task that skips a test is shown
"1 more skipped than on trunk" in its reviewer's prompt, `t25 task show` and the merge's
evidence - where its checks alone say "passed"."""

from __future__ import annotations

import asyncio
import json
import subprocess
import sys

import pytest

from core.control import baselines
from core.domain.figures import Figures
from core.domain.models import ArtifactKind, TaskState
from tests.support.pipeline import Env, review_prompt
from tests.support.projects import FEATURE, make_project, needs_bwrap, shared_dir, tools_venv
from tests.support.shapes import conforms

S = TaskState
pytestmark = needs_bwrap

SKIP = (
    r"scripted: write=tests/test_calc.py:import pytest\n\nfrom calc import add\n\n\n"
    r'@pytest.mark.skip(reason="later")\ndef test_add():\n    assert add(2, 3) == 5\n'
)


@pytest.fixture(scope="session")
def tools(tmp_path_factory):
    return tools_venv(shared_dir(tmp_path_factory))


@pytest.fixture
async def factory(tmp_path, tools):
    e = Env(make_project(tmp_path, tools))
    yield e
    await e.close()


async def t25(repo, *args: str) -> str:
    """The real command line, beside the factory the test holds open."""
    done = await asyncio.to_thread(
        subprocess.run,
        [sys.executable, "-m", "t25_tui", *args],
        cwd=repo,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == 0, done.stderr
    return done.stdout


def checks(project, *extra: str) -> list[dict[str, object]]:
    python = str(project / ".venv" / "bin" / "python")
    run = [python, "-m", "pytest", "-q", "-p", "no:cacheprovider", *extra]
    return [{"name": "tests", "run": run}]


async def test_a_skipped_test_reads_one_more_skipped_than_on_the_default_branch(factory, tools):
    # the checks write a JUnit XML report: read, then removed, so no tree is left unclean
    control = await factory.open(
        qa={"checks": checks(factory.repo, "--junitxml=reports/junit.xml")},
        sandbox={"mode": "required", "read_paths": [str(tools)]},
    )
    first = await control.new_task("Multiply", actor="ana", description=FEATURE)
    await factory.work()
    first = await factory.task(first.id)
    assert first.state is S.DONE and first.checks_passed, first.error
    assert await baselines.latest(control.store, first.project) is None  # nothing merged yet
    first = await control.merge(first.id, actor="ana")
    assert first.merged
    assert not (factory.repo / ".factory" / "worktrees" / first.id).exists()  # cleaned

    # the merge's trial ran the checks on the merge commit, now trunk's head: its figures
    kept = await baselines.latest(control.store, first.project)
    assert kept is not None and kept.branch == "trunk" and kept.task_id == first.id
    assert kept.figures == {"tests": Figures(source="junit", passed=2)}
    head = (factory.repo / ".git" / "refs" / "heads" / "trunk").read_text().strip()
    assert kept.commit == head

    second = await control.new_task("Skip add for now", actor="ana", description=SKIP)
    await factory.work()
    second = await factory.task(second.id)
    assert second.state is S.DONE and second.checks_passed, second.error

    said = "1 passed, 1 skipped — 1 fewer passed, 1 more skipped than on trunk"
    prompt = await review_prompt(control, second.id)
    assert "### tests: passed (required, exit 0," in prompt
    assert f"Tests: {said}" in prompt

    detail = await control.detail(second.id)
    assert [c.figures for c in detail.checks] == [Figures(source="junit", passed=1, skipped=1)]
    evidence = await control.merge_evidence(second.id)
    assert f"  check          tests: passed ({said})" in evidence.lines()

    # the command line says the same: task show (text and --json), merge --dry-run
    shown = await t25(factory.repo, "task", "show", second.id)
    assert f"  tests: passed ({said})" in shown.splitlines()
    check = conforms("task-show", await t25(factory.repo, "task", "show", second.id, "--json"))
    assert check["checks"][0]["line"] == said
    assert check["checks"][0]["default_branch"] == "trunk"
    assert check["checks"][0]["default_branch_figures"]["passed"] == 2
    dry = await t25(factory.repo, "merge", second.id, "--dry-run")
    assert f"  check          tests: passed ({said})" in dry.splitlines()

    # the QA report keeps the figures the worker sent
    qa = [
        a
        for a in await control.store.list_artifacts(task_id=second.id)
        if a.meta.kind is ArtifactKind.QA_REPORT
    ]
    _, content = await control.store.get_artifact(qa[-1].id)
    assert json.loads(content)["checks"][0]["figures"]["skipped"] == 1

    # merged, its figures are trunk's: the next change is shown beside them
    second = await control.merge(second.id, actor="ana")
    kept = await baselines.latest(control.store, first.project)
    assert kept is not None and kept.task_id == second.id
    assert kept.figures == {"tests": Figures(source="junit", passed=1, skipped=1)}
