"""What `t25 doctor` checks beside the agent CLIs: git, bubblewrap, the store, and where an
agent CLI that is not on PATH may have been installed instead.

Each check is bounded by a timeout and returns a value (`ToolCheck`, `StoreCheck`); none
raises, so one failing check never hides the others.
"""

from __future__ import annotations

import asyncio
import re
import shutil
from collections.abc import Iterable
from pathlib import Path

from t25_tui.cli.shapes import StoreCheck, ToolCheck

TIMEOUT_S = 5.0
# `t25 merge` builds its merge commit with `git merge-tree --write-tree` (git 2.38).
MIN_GIT = (2, 38)
_VERSION = re.compile(r"(\d+)\.(\d+)(?:\.(\d+))?")
# Where agent CLIs are installed off PATH: a project's own `.tools/` (npm packages under
# .tools/npm, a virtualenv such as .tools/aider), and per-user install directories.
_TOOL_DIRS = (".tools/npm/node_modules/.bin", ".tools/*/bin", ".tools/bin")
_USER_DIRS = ("~/.local/bin", "~/.npm-global/bin", "~/.bun/bin")


async def _output(argv: list[str]) -> str | None:
    """What `argv` prints (stdout and stderr), or None when it cannot run or hangs."""
    try:
        proc = await asyncio.create_subprocess_exec(
            *argv,
            stdin=asyncio.subprocess.DEVNULL,
            stdout=asyncio.subprocess.PIPE,
            stderr=asyncio.subprocess.STDOUT,
            start_new_session=True,
        )
    except OSError:
        return None
    try:
        out, _ = await asyncio.wait_for(proc.communicate(), TIMEOUT_S)
    except TimeoutError:
        proc.kill()
        await proc.wait()
        return None
    return out.decode("utf-8", "replace")


def _version(text: str | None) -> str | None:
    found = _VERSION.search(text or "")
    return found.group(0) if found else None


async def git_check() -> ToolCheck:
    """git on PATH, and new enough for `t25 merge`."""
    path = shutil.which("git")
    if path is None:
        return ToolCheck(path=None, version=None, ok=False, problem="git is not on PATH")
    version = _version(await _output([path, "--version"]))
    parts = tuple(int(p) for p in (version or "0.0").split(".")[:2])
    if version is None or parts < MIN_GIT:
        wanted = ".".join(map(str, MIN_GIT))
        return ToolCheck(
            path=path,
            version=version,
            ok=False,
            problem=f"git {version or '(version unknown)'} is older than {wanted}, which "
            "`t25 merge` needs (git merge-tree --write-tree)",
        )
    return ToolCheck(path=path, version=version, ok=True, problem=None)


async def bubblewrap_check() -> ToolCheck:
    """bubblewrap on PATH, and able to make its namespaces here (tried for real)."""
    from adapters.sandbox import bwrap_problem

    path = shutil.which("bwrap")
    problem = await asyncio.to_thread(bwrap_problem)
    version = _version(await _output([path, "--version"])) if path else None
    return ToolCheck(path=path, version=version, ok=problem is None, problem=problem)


async def store_check(url: str) -> StoreCheck:
    """A Postgres store answers (connect, one query); a SQLite store is a file, not checked."""
    from store.postgres_schema import connect, shown

    if not url.startswith(("postgresql:", "postgres:")):
        return StoreCheck(url=url, reachable=None, problem=None)
    try:
        con = await asyncio.wait_for(connect(url, application_name="t25-doctor"), TIMEOUT_S)
    except TimeoutError:
        problem = f"the Postgres store at {shown(url)} did not answer within {TIMEOUT_S:g} s"
        return StoreCheck(url=shown(url), reachable=False, problem=problem)
    except Exception as exc:  # noqa: BLE001 - every way of failing is reported, none raised
        message = getattr(exc, "message", None) or str(exc) or type(exc).__name__
        return StoreCheck(url=shown(url), reachable=False, problem=message)
    try:
        await asyncio.wait_for(con.fetchval("SELECT 1"), TIMEOUT_S)
    finally:
        await con.close(timeout=2)
    return StoreCheck(url=shown(url), reachable=True, problem=None)


def elsewhere(binary: str, roots: Iterable[Path], own: Iterable[str] = ()) -> Path | None:
    """`binary`, executable, in a place agent CLIs are installed off PATH: under a root's
    `.tools/`, a per-user bin directory, or one of the CLI's `own` (its installer's,
    `CliAdapterSpec.install_dirs`). Runs use PATH only, so this is for the hint."""
    dirs = [d for root in dict.fromkeys(roots) for p in _TOOL_DIRS for d in sorted(root.glob(p))]
    dirs += [Path(d).expanduser() for d in (*_USER_DIRS, *own)]
    for directory in dirs:
        candidate = directory / binary
        if shutil.which(str(candidate)):  # a file, and executable
            return candidate
    return None
