"""PR_OPEN: make a task's branch ready for a human review.

With a git remote `origin` and the GitHub CLI (`gh`) on PATH, T25 pushes the branch and
opens a pull request. Otherwise the local branch itself is the unit of review, and
`t25 merge` merges it. Either way a human decides; T25 never merges on its own.

Pushing needs the operator's own transport (SSH agent, credential helper), so unlike
T25's other git calls it keeps `core.sshCommand` and `credential.helper` from the
repository's config. Where it pushes to is pinned: the URLs and receive-pack of `origin`
as T25 read them before any run (`core.workspace.push_settings`), given as arguments, and
the push is refused if anything else it reads has changed since. Hooks, fsmonitor, the
pager, submodules and signing stay off, for the push and for the git that `gh` runs.
"""

from __future__ import annotations

import os
import shutil
from pathlib import Path
from typing import TYPE_CHECKING

from core.domain.models import Task
from core.errors import PublishFailed
from core.workspace.git import SAFE_OVERRIDES, git_env, run_command
from core.workspace.push_settings import REMOTE, current_push_settings

if TYPE_CHECKING:
    from core.workspace.worktrees import Worktrees

PUSH_CONFIG = (
    "-c",
    "core.hooksPath=/dev/null",
    "-c",
    "core.fsmonitor=false",
    "-c",
    "protocol.ext.allow=never",
    "-c",
    "push.recurseSubmodules=no",
    "-c",
    "push.gpgSign=false",
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
    pinned = worktrees.push_settings
    gh = shutil.which("gh")
    if not pinned.urls or gh is None:
        why = f"no git remote '{REMOTE}'" if not pinned.urls else "`gh` is not installed"
        return f"branch {task.branch} is the review unit ({why}): {stat.summary()}"
    await _refuse_drift(worktrees)
    transport = {k: os.environ[k] for k in TRANSPORT_ENV if k in os.environ}
    await _push(worktrees, task, transport)
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
        {**git_env(SAFE_OVERRIDES), **transport},  # the git gh runs plants nothing either
        "gh pr create",
    )
    return f"pushed {task.branch} to {REMOTE} and opened {url.splitlines()[-1] if url else 'a pull request'}"


async def _refuse_drift(worktrees: Worktrees) -> None:
    drift = worktrees.push_settings.changed(await current_push_settings(worktrees.repo))
    if drift:
        raise PublishFailed(
            f"the push settings changed since T25 started ({', '.join(drift[:5])}); "
            "T25 pushes only with the ones the operator had",
            hint="put them back (or restart T25 to take them as yours), then `t25 retry`",
        )


async def _push(worktrees: Worktrees, task: Task, transport: dict[str, str]) -> None:
    """Push the task's branch to each of origin's URLs, with the receive-pack read at start."""
    pinned, ref = worktrees.push_settings, f"refs/heads/{task.branch}"
    for url in pinned.urls:
        await _run(
            [
                "git",
                *PUSH_CONFIG,
                "push",
                f"--receive-pack={pinned.receive_pack}",
                "--",
                url,
                f"{ref}:{ref}",
            ],
            worktrees.repo,
            {**git_env(), **transport},
            "git push",
        )


async def _run(argv: list[str], cwd: Path, env: dict[str, str], what: str) -> str:
    done = await run_command(argv, cwd=cwd, env=env)  # a cancelled push leaves no child behind
    if done.code != 0:
        detail = done.err.strip().splitlines()
        raise PublishFailed(
            f"{what} failed: {detail[-1] if detail else f'exit {done.code}'}",
            hint="fix the remote or gh login, then `t25 retry`",
        )
    return done.out.decode(errors="replace").strip()
