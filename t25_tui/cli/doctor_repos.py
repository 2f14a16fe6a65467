"""What `t25 doctor` checks of each project's repository: a default branch with a commit to
start tasks from, and git-lfs for a repository that keeps files in Git LFS.

Each finding is one line with its hint; a repository that is not here (a serve host whose
workers hold the checkouts) is not examined.
"""

from __future__ import annotations

import shutil
from pathlib import Path
from typing import TYPE_CHECKING

from core.errors import GitError
from core.workspace.git import default_branch, repo_root, run_git
from core.workspace.lfs import missing_lfs, uses_lfs
from core.workspace.lfs_filter import INSTALL_HINT, lfs_program

if TYPE_CHECKING:
    from core.config.schema import Config, ProjectConfig


async def repository_problems(config: Config) -> list[str]:
    """One line for each thing in a project's repository that stops its tasks; none
    without git (the doctor's own git line says that)."""
    if shutil.which("git") is None:
        return []
    out: list[str] = []
    for project in config.projects:
        out += await _problems(project)
    return out


async def _problems(project: ProjectConfig) -> list[str]:
    repo = Path(project.repo)
    if not repo.is_dir() or repo_root(repo) is None:
        return []
    where = f"project {project.name} ({repo})"
    try:
        branch = project.default_branch or default_branch(repo)
    except GitError as exc:
        return [f"{where}: {exc.message} (hint: {exc.hint})"]
    out = []
    head = f"refs/heads/{branch}"
    has_commit = await _exists(repo, head)
    if not has_commit:
        remote = f"refs/remotes/origin/{branch}"
        hint = (
            f"create it from origin's: git branch {branch} origin/{branch}"
            if await _exists(repo, remote)
            else "make a first commit on it, or set default_branch for this project in "
            "t25.yaml to a branch that has one"
        )
        out.append(
            f"{where}: the default branch {branch} has no commit here, so no task can "
            f"start from it (hint: {hint})"
        )
    if lfs_program() is None and await uses_lfs(repo, head if has_commit else None):
        out.append(f"{where}: {missing_lfs('the repository')} (hint: {INSTALL_HINT})")
    return out


async def _exists(repo: Path, ref: str) -> bool:
    done = await run_git(
        "rev-parse", "--verify", "--quiet", f"{ref}^{{commit}}", cwd=repo, drivers_from=()
    )
    return done.code == 0
