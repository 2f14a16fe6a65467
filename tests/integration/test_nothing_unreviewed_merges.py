"""Nothing reaches the merge that no review saw: DOCS commits documentation by its real
extensions only, the files a check writes are never committed, the merge's evidence names
every commit after the head review approved, and a merge that would write over a file of
the main checkout is refused before its checks run."""

from __future__ import annotations

import sys

import pytest

from core.domain.decisions import Decision
from core.domain.events import TaskTransitioned
from core.domain.models import TaskState
from core.domain.verbs import Verb
from core.errors import MergeRefused, PolicyRefused
from core.workspace.git import git_sync
from tests.support.git import git_started

S = TaskState

# A check that leaves what checks leave: a report beside the code, a file in a folder of its
# own, and a tracked file rewritten (a formatter's work).
LITTERING = (
    "import pathlib\n"
    "pathlib.Path('qa-report.txt').write_text('73 lines of report\\n')\n"
    "pathlib.Path('out/coverage').mkdir(parents=True, exist_ok=True)\n"
    "pathlib.Path('out/coverage/index.html').write_text('<html></html>')\n"
    "pathlib.Path('README.md').write_text('rewritten by a check\\n')\n"
)


async def moves_into(control, task_id: str, state: S) -> list[TaskTransitioned]:
    events = await control.store.events_after(0, task_id=task_id, limit=1000)
    return [e for e in events if isinstance(e, TaskTransitioned) and e.to_state is state]


@pytest.mark.parametrize(
    "path", ["dev-requirements.txt", "CMakeLists.txt", "deps.cmake", "notes.txt", "a.mdx"]
)
async def test_a_docs_change_that_is_not_documentation_goes_through_qa_and_review(env, path):
    control = await env.open()
    task = await env.new(description=f"scripted: docs={path}")
    await env.work()
    task = await env.task(task.id)
    assert task.state is S.DONE, task.error
    assert (await env.history(task.id))[-6:] == [S.DOCS, S.QA, S.REVIEW, S.PR_OPEN, S.DOCS, S.DONE]
    back = [m for m in await moves_into(control, task.id, S.QA) if m.from_state is S.DOCS]
    assert f"changed more than documentation ({path})" in back[0].reason


@pytest.mark.parametrize("path", ["dev-requirements.txt", "CMakeLists.txt", "deps.cmake"])
async def test_build_and_requirement_files_a_docs_stage_changes_are_named_at_merge(env, path):
    control = await env.open()
    task = await env.new(description=f"scripted: docs={path}")
    await env.work()
    task = await env.task(task.id)
    assert path in task.protected_paths
    with pytest.raises(PolicyRefused) as refused:
        await control.merge(task.id, actor="ana")
    assert f"--allow-path {path}" in (refused.value.hint or "")
    merged = await control.decide(
        Decision(verb=Verb.MERGE, task=task.id, actor="ana", allow_paths=(path,))
    )
    assert merged.merged


async def test_what_a_check_writes_in_the_tree_is_never_committed(env):
    (env.repo / "check_litter.py").write_text(LITTERING)
    git_sync("add", "check_litter.py", cwd=env.repo)
    git_sync("commit", "-qm", "a check that litters", cwd=env.repo)
    control = await env.open(
        qa={"checks": [{"name": "litter", "run": [sys.executable, "check_litter.py"]}]}
    )
    task = await env.new(description="scripted: docs=README.md")
    await env.work()
    task = await env.task(task.id)
    assert task.state is S.DONE, task.error
    branch = git_sync("ls-tree", "-r", "--name-only", task.branch, cwd=env.repo).splitlines()
    assert "qa-report.txt" not in branch and "out/coverage/index.html" not in branch
    readme = git_sync("show", f"{task.branch}:README.md", cwd=env.repo)
    assert readme.endswith(f"Documented {task.id}.") and "rewritten by a check" not in readme
    into_review = await moves_into(control, task.id, S.REVIEW)
    assert "3 files in the tree, put back before any commit" in into_review[0].reason
    assert "qa-report.txt" in into_review[0].reason
    merged = await control.merge(task.id, actor="ana")
    assert merged.merged and not (env.repo / "qa-report.txt").exists()


async def test_qa_without_checks_takes_no_state_of_the_tree(env, monkeypatch):
    await env.open(qa={"checks": []})  # nothing runs that could leave a file
    started = git_started(monkeypatch)
    task = await env.new(description="scripted: docs=README.md")
    await env.work()
    assert (await env.task(task.id)).state is S.DONE
    assert [args for args in started if args[0] == "status" and "--no-renames" in args] == []


async def test_the_merge_evidence_names_the_commits_no_review_saw(env):
    control = await env.open()
    task = await env.new(description="scripted: docs=README.md")
    await env.work()
    task = await env.task(task.id)
    evidence = await control.merge_evidence(task.id)
    docs = git_sync("rev-parse", "--short=7", task.branch, cwd=env.repo)
    assert len(evidence.unreviewed) == 1
    assert evidence.unreviewed[0].startswith(docs[:7])
    assert evidence.unreviewed[0].endswith(f"{task.id}: documentation")
    assert evidence.approved_head == git_sync("rev-parse", f"{task.branch}~1", cwd=env.repo)
    shown = "\n".join(evidence.lines())
    assert "not reviewed   1 commit(s) after the head review approved" in shown
    assert "no review saw them" in shown

    plain = await env.new(title="Another")  # no docs commit: nothing unreviewed
    await env.work()
    assert (await control.merge_evidence(plain.id)).unreviewed == ()


async def test_a_merge_that_would_write_over_an_untracked_file_is_refused_before_its_checks(env):
    control = await env.open()
    task = await env.new()
    await env.work()
    task = await env.task(task.id)
    added = git_sync("diff", "--name-only", "trunk", task.branch, cwd=env.repo).splitlines()
    mine = env.repo / added[0]
    mine.parent.mkdir(parents=True, exist_ok=True)
    mine.write_text("the operator's own notes\n")
    worktrees = control.worktrees(task.project)
    with pytest.raises(MergeRefused, match="would write over 1 file") as refused:
        await worktrees.merges.trial_merge(task, message="trial")  # before any trial tree or check
    assert added[0] in refused.value.message
    assert not (control.config.worktrees.root / ".merge" / task.id).exists()
    with pytest.raises(MergeRefused, match="would write over"):
        await control.merge(task.id, actor="ana")
    assert mine.read_text() == "the operator's own notes\n"
    mine.unlink()
    assert (await control.merge(task.id, actor="ana")).merged
