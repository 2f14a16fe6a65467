"""PR_OPEN: make a task's branch ready for a human review.

With a git remote `origin` and the GitHub CLI (`gh`) on PATH, T25 pushes the branch and
opens a pull request. Otherwise the local branch itself is the unit of review, and
`t25 merge` merges it. Either way a human decides; T25 never merges on its own.

Pushing needs the operator's own transport (SSH agent, credential helper), so unlike
T25's other git calls it keeps `core.sshCommand` and `credential.helper` from the
repository's config. That config is the human's: the main checkout, `.git/config`
included, is fingerprinted around every agent run, and a run that changed it failed.
Hooks, fsmonitor and the pager stay off.
"""

from __future__ import annotations

import os
import shutil
from pathlib import Path

from core.domain.models import Task
from core.errors import PublishFailed
from core.workspace.git import git, git_env, run_command
from core.workspace.worktrees import Worktrees

PUSH_CONFIG = (
    "-c",
    "core.hooksPath=/dev/null",
    "-c",
    "core.fsmonitor=false",
    "-c",
    "protocol.ext.allow=never",
)
# What a push may need from the operator's session to reach the remote.
TRANSPORT_ENV = (
    "SSH_AUTH_SOCK",
    "SSH_AGENT_PID",
    "GH_TOKEN",
    "GITHUB_TOKEN",
    "GH_HOST",
    "XDG_CONFIG_HOME",
    "HTTPS_PROXY",
    "HTTP_PROXY",
    "NO_PROXY",
)


async def publish(worktrees: Worktrees, task: Task, *, body: str = "") -> str:
    """Push and open a pull request when possible; say what was done, in one line."""
    stat = await worktrees.diff_stat(task)
    remotes = (await git("remote", cwd=worktrees.repo)).split()
    gh = shutil.which("gh")
    if "origin" not in remotes or gh is None:
        why = "no git remote 'origin'" if "origin" not in remotes else "`gh` is not installed"
        return f"branch {task.branch} is the review unit ({why}): {stat.summary()}"
    env = {**git_env(), **{k: os.environ[k] for k in TRANSPORT_ENV if k in os.environ}}
    ref = f"refs/heads/{task.branch}"
    await _run(
        ["git", *PUSH_CONFIG, "push", "--", "origin", f"{ref}:{ref}"],
        worktrees.repo,
        env,
        "git push",
    )
    url = await _run(
        [
            gh,
            "pr",
            "create",
            "--head",
            task.branch,
            "--base",
            worktrees.default_branch,
            "--title",
            f"{task.title} ({task.id})",
            "--body",
            body or task.description or task.title,
        ],
        worktrees.path_for(task.id),
        env,
        "gh pr create",
    )
    return f"pushed {task.branch} to origin and opened {url.splitlines()[-1] if url else 'a pull request'}"


async def _run(argv: list[str], cwd: Path, env: dict[str, str], what: str) -> str:
    done = await run_command(argv, cwd=cwd, env=env)  # a cancelled push leaves no child behind
    if done.code != 0:
        detail = done.err.strip().splitlines()
        raise PublishFailed(
            f"{what} failed: {detail[-1] if detail else f'exit {done.code}'}",
            hint="fix the remote or gh login, then `t25 retry`",
        )
    return done.out.decode(errors="replace").strip()
