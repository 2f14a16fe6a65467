"""T25's own calls to git: always an argv list, never a shell, never a planted program.

A worktree shares `.git/config` and hooks with the main checkout, so an agent in any
worktree could plant an fsmonitor, a hook or a pager there. Every git call T25 makes
overrides those with harmless values and runs with a minimal, predictable environment.
"""

from __future__ import annotations

import asyncio
import os
import subprocess
from pathlib import Path

from core.errors import T25Error

# Repository-configured programs T25's own git calls must never run.
SAFE_CONFIG = (
    "-c", "core.fsmonitor=false",
    "-c", "core.hooksPath=/dev/null",
    "-c", "core.pager=cat",
    "-c", "core.editor=true",
    "-c", "core.sshCommand=false",
    "-c", "credential.helper=",
    "-c", "diff.external=",
    "-c", "protocol.ext.allow=never",
)


class GitError(T25Error):
    """A git command that failed; the message carries its stderr."""


def git_env() -> dict[str, str]:
    keep = ("PATH", "HOME", "USER", "LOGNAME", "TMPDIR", "GIT_AUTHOR_NAME", "GIT_AUTHOR_EMAIL",
            "GIT_COMMITTER_NAME", "GIT_COMMITTER_EMAIL")
    env = {k: os.environ[k] for k in keep if k in os.environ}
    env.update(LC_ALL="C", GIT_TERMINAL_PROMPT="0", GIT_OPTIONAL_LOCKS="0", GIT_PAGER="cat",
               GIT_CONFIG_NOSYSTEM="1")
    return env


def _argv(args: tuple[str, ...]) -> list[str]:
    return ["git", *SAFE_CONFIG, *args]


def _fail(args: tuple[str, ...], cwd: Path, code: int, stderr: str) -> GitError:
    detail = stderr.strip().splitlines()[-1] if stderr.strip() else f"exit status {code}"
    return GitError(f"git {' '.join(args)} failed in {cwd}: {detail}")


def git_sync(*args: str, cwd: Path, check: bool = True) -> str:
    """Run git synchronously (command-line start-up, before any event loop matters)."""
    try:
        done = subprocess.run(_argv(args), cwd=cwd, env=git_env(), stdin=subprocess.DEVNULL,
                              capture_output=True, text=True)
    except FileNotFoundError:
        raise GitError("git is not installed or not on PATH") from None
    if check and done.returncode != 0:
        raise _fail(args, cwd, done.returncode, done.stderr)
    return done.stdout.strip()


async def git(*args: str, cwd: Path, check: bool = True) -> str:
    """Run git without blocking the event loop; return its stripped stdout."""
    proc = await asyncio.create_subprocess_exec(
        *_argv(args), cwd=cwd, env=git_env(), stdin=subprocess.DEVNULL,
        stdout=subprocess.PIPE, stderr=subprocess.PIPE,
    )
    out, err = await proc.communicate()
    if check and proc.returncode != 0:
        raise _fail(args, cwd, proc.returncode or 0, err.decode(errors="replace"))
    return out.decode(errors="replace").strip()


def repo_root(path: Path) -> Path | None:
    """The top of the main checkout containing `path`, or None outside a repository."""
    out = git_sync("rev-parse", "--show-toplevel", cwd=path, check=False)
    return Path(out) if out else None


def default_branch(repo: Path) -> str:
    """The branch tasks start from: origin's HEAD when there is one, else the checked-out one."""
    remote = git_sync("symbolic-ref", "--quiet", "--short", "refs/remotes/origin/HEAD",
                      cwd=repo, check=False)
    if remote:
        return remote.split("/", 1)[1]
    branch = git_sync("symbolic-ref", "--quiet", "--short", "HEAD", cwd=repo, check=False)
    if not branch:
        raise GitError(f"cannot tell the default branch of {repo}: HEAD is detached",
                       hint="set default_branch for this project in t25.yaml")
    return branch


def identity(cwd: Path) -> str:
    """Who is acting: the OS user, with the git identity when one is configured."""
    import getpass

    user = getpass.getuser()
    name = git_sync("config", "user.name", cwd=cwd, check=False)
    email = git_sync("config", "user.email", cwd=cwd, check=False)
    who = " ".join(p for p in (name, f"<{email}>" if email else "") if p)
    return f"{user} ({who})" if who else user
