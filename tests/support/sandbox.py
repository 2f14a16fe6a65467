"""The sandbox's hostile cases: dev runs that misbehave, checks committed to a project, and
scripts run inside a confinement."""

from __future__ import annotations

import asyncio
import sys
from pathlib import Path

from adapters.process import minimal_env, run_process
from adapters.sandbox import Bubblewrap, Confinement
from core.workspace.git import git_sync


def dev(*misbehave: str) -> dict[str, list[dict[str, object]]]:
    args: list[str] = []
    for what in misbehave:
        args += ["--misbehave", what]
    return {"dev": [{"adapter": "scripted", "args": args}]}


def committed_check(shop: Path, name: str, code: str) -> list[str]:
    """A check whose code is in the repository, as code an agent wrote would be."""
    (shop / name).write_text(code)
    git_sync("add", name, cwd=shop)
    git_sync("commit", "-qm", f"add {name}", cwd=shop)
    return [sys.executable, name]


async def inside(script: str, tree: Path, **confinement) -> tuple[str, int | None]:
    """Run `script` (Python) confined as a run is; what it printed and its exit status."""
    tree.mkdir(exist_ok=True)
    return await confined(script, Confinement(worktree=tree, **confinement))


async def confined(script: str, box: Confinement) -> tuple[str, int | None]:
    """Run `script` (Python) in bubblewrap confined as `box` says."""
    done = await run_process(
        Bubblewrap().wrap([sys.executable, "-c", script], box, {}),
        cwd=box.worktree,
        env=minimal_env(),
        timeout_s=60,
        abort=asyncio.Event(),
    )
    return done.log.decode("utf-8", "replace"), done.exit_code
