"""PR_OPEN: make a task's branch ready for a human review.

With a git remote `origin`, T25 pushes the branch (plain `git push`), and with the GitHub
CLI (`gh`) on PATH it opens a pull request. Otherwise the branch itself is the unit of
review, and `t25 merge` merges it; a merge a worker makes is pushed the same way
(`push_default_branch`). Either way a human decides; T25 never merges on its own.

Pushing needs the operator's own transport (SSH agent, credential helper), so unlike
T25's other git calls it keeps `core.sshCommand` and `credential.helper` from the
repository's config. Where it pushes to is pinned: the URLs and receive-pack of `origin`
as T25 read them before any run (`core.workspace.push_settings`), given as arguments, and
the push is refused if anything else it reads has changed since. Hooks, fsmonitor, the
pager, submodules and signing stay off, for the push and for the git that `gh` runs.
"""

from __future__ import annotations

import os
import re
import shutil
from pathlib import Path
from typing import TYPE_CHECKING

from core.domain.models import Task
from core.errors import PublishFailed
from core.workspace.git import SAFE_OVERRIDES, git_env, run_command
from core.workspace.lfs import missing_lfs, uses_lfs
from core.workspace.lfs_filter import lfs_program
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
    stat = await worktrees.changes.diff_stat(task)
    if not worktrees.push_settings.urls:
        return (
            f"branch {task.branch} is the review unit (no git remote '{REMOTE}'): {stat.summary()}"
        )
    transport = await push_branch(worktrees, task)
    gh = shutil.which("gh")
    if gh is None:
        return (
            f"pushed {task.branch} to {REMOTE}; no pull request opened (`gh` is not "
            f"installed), the branch is the review unit: {stat.summary()}"
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
        {**git_env(SAFE_OVERRIDES), **transport},  # the git gh runs plants nothing either
        "gh pr create",
    )
    return f"pushed {task.branch} to {REMOTE} and opened {url.splitlines()[-1] if url else 'a pull request'}"


async def push_branch(worktrees: Worktrees, task: Task) -> dict[str, str]:
    """Push the task's branch to `origin` (PublishFailed when there is none, or the push
    fails): the transport it was pushed with, for what goes on to the forge."""
    if not worktrees.push_settings.urls:
        raise PublishFailed(
            f"there is no git remote '{REMOTE}' to push {task.branch} to for its pull request",
            hint=f"add the forge's repository as `{REMOTE}` (git remote add {REMOTE} URL), "
            "restart T25, then `t25 retry`",
        )
    await _refuse_drift(worktrees)
    transport = _transport()
    await _push(worktrees, f"refs/heads/{task.branch}", transport)
    return transport


async def push_default_branch(worktrees: Worktrees) -> str:
    """After a merge made on this host: the default branch pushed to `origin` with plain
    `git push` (fast-forward only, as every push here), where there is a remote; in one
    line, what was done. A push that fails is said, never raised: the merge has landed."""
    default = worktrees.default_branch
    if not worktrees.push_settings.urls:
        return f"no git remote '{REMOTE}' to push {default} to"
    try:
        await _refuse_drift(worktrees)
        await _push(worktrees, f"refs/heads/{default}", _transport())
    except PublishFailed as exc:
        return f"{default} was not pushed to {REMOTE}: {exc.message}"
    return f"pushed {default} to {REMOTE}"


def _transport() -> dict[str, str]:
    return {k: os.environ[k] for k in TRANSPORT_ENV if k in os.environ}


async def _refuse_drift(worktrees: Worktrees) -> None:
    drift = worktrees.push_settings.changed(await current_push_settings(worktrees.repo))
    if drift:
        raise PublishFailed(
            f"the push settings changed since T25 started ({', '.join(drift[:5])}); "
            "T25 pushes only with the ones the operator had",
            hint="put them back (or restart T25 to take them as yours), then `t25 retry`",
        )


async def _push(worktrees: Worktrees, ref: str, transport: dict[str, str]) -> None:
    """Push `ref` to each of origin's URLs, with the receive-pack read at start; the Git LFS
    content it carries first, by git-lfs itself (the push runs no hook, so git-lfs's
    pre-push would not): a remote must never get pointers whose content it lacks."""
    pinned = worktrees.push_settings
    lfs = await uses_lfs(worktrees.repo, ref)
    program = lfs_program()
    if lfs and program is None:
        raise PublishFailed(
            f"{missing_lfs('the repository')}; a push would leave the remote without them",
            hint="install git-lfs (apt-get install git-lfs), then `t25 retry`",
        )
    for url in pinned.urls:
        if lfs and program is not None:
            await _run(
                [program, "push", _lfs_remote(url, worktrees.repo), ref],
                worktrees.repo,
                {**git_env(), **transport},
                "git lfs push",
            )
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


def _lfs_remote(url: str, repo: Path) -> str:
    """The remote as git-lfs takes it: a URL (a local path, which git takes as it is,
    becomes a file:// one)."""
    if "://" in url or re.match(r"^[^/]+@[^/]+:", url) or re.match(r"^[\w.-]+:[^/]", url):
        return url
    return (repo / url).resolve().as_uri()


async def _run(argv: list[str], cwd: Path, env: dict[str, str], what: str) -> str:
    done = await run_command(argv, cwd=cwd, env=env)  # a cancelled push leaves no child behind
    if done.code != 0:
        detail = done.err.strip().splitlines()
        raise PublishFailed(
            f"{what} failed: {detail[-1] if detail else f'exit {done.code}'}",
            hint="fix the remote or gh login, then `t25 retry`",
        )
    return done.out.decode(errors="replace").strip()
