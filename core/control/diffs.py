"""A task's diff as every face reads it (`Queries.diff`): from git when the project's
repository has the task branch, else from the diffs its implementing runs reported.

Attempt N is the task's Nth IMPLEMENTING run (1 the first; a QA or review send-back
starts another). Its change is the commit T25 made of that run; when the repository here
does not hold it (the runs were worked on another host), the diff the run reported is
shown instead, which is the whole branch's change as that run left it, and `note` says so.
"""

from __future__ import annotations

from pathlib import Path

from core.config.schema import Config
from core.domain.diffs import TaskDiff, capped, files_of
from core.domain.models import ArtifactKind, Run, Task, TaskState
from core.errors import ConfigError, GitError, NotFound
from core.ports import Store
from core.workspace.changes import Change, branch_change, run_change
from core.workspace.git import default_branch


async def read_diff(config: Config, store: Store, task: Task, attempt: int | None) -> TaskDiff:
    """The task's whole change (`attempt` None) or one implementing attempt's."""
    runs = [r for r in await store.list_runs(task_id=task.id) if r.stage is TaskState.IMPLEMENTING]
    run: Run | None = None
    if attempt is not None:
        if not 1 <= attempt <= len(runs):
            raise NotFound(
                f"{task.id} has no implementing attempt {attempt} (it has {len(runs)})",
                hint=f"`t25 diff {task.id}` shows the whole change",
            )
        run = runs[attempt - 1]
    empty = TaskDiff(
        task_id=task.id, attempt=attempt, attempts=len(runs), run_id=run.id if run else None
    )
    change = await _from_git(config, task, run)
    if change is not None:
        text, cut = capped(change.text)
        return empty.model_copy(
            update={
                "source": "git",
                "base": change.base,
                "tip": change.tip,
                "files": files_of(change.text),
                "text": text,
                "truncated": cut,
            }
        )
    return await _from_artifact(store, task, run, runs, empty)


async def _from_git(config: Config, task: Task, run: Run | None) -> Change | None:
    try:
        project = config.project(task.project)
        repo = Path(project.repo)
        if run is not None:
            return await run_change(repo, task.branch, run.id)
        main = project.default_branch or default_branch(repo)
        return await branch_change(repo, main, task.branch)
    except (ConfigError, GitError, OSError):
        return None  # not a project here, or not a repository git can read


async def _from_artifact(
    store: Store, task: Task, run: Run | None, runs: list[Run], empty: TaskDiff
) -> TaskDiff:
    """The diff the chosen run (or the newest implementing run) reported."""
    reported = {
        a.meta.run_id: a
        for a in await store.list_artifacts(task_id=task.id)
        if a.meta.kind is ArtifactKind.DIFF
    }
    chosen = [run] if run is not None else list(reversed(runs))
    found = next((reported[r.id] for r in chosen if r.id in reported), None)
    if found is None:
        note = f"no diff: {task.branch} is not in this repository and no implementing run "
        return empty.model_copy(update={"note": note + "reported one"})
    missing = (
        f"no commit of {run.id} on {task.branch} in this repository"
        if run is not None
        else f"{task.branch} is not in this repository"
    )
    _, content = await store.get_artifact(found.id)  # verified against its SHA-256
    whole = content.decode(errors="replace")
    text, cut = capped(whole)
    return empty.model_copy(
        update={
            "run_id": found.meta.run_id,
            "source": "artifact",
            "note": f"{missing}: the diff {found.meta.run_id} reported ({found.id}), the whole "
            "branch as that run left it",
            "files": files_of(whole),
            "text": text,
            "truncated": cut,
        }
    )
