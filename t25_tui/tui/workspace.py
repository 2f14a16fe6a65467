"""Into a task's workspace: the operator's `$SHELL` or `$EDITOR`, started in its worktree.

The cockpit's `shell` and `editor` commands and `t25 shell ID` come here for the
directory and the argument list; each starts the program its own way (the cockpit
suspends itself around it). A worktree exists only on the host whose workers ran the
task: attached to a remote `t25 serve`, there is none here to open.

No Textual here: the command line uses it too.
"""

from __future__ import annotations

import shlex
from collections.abc import Mapping
from pathlib import Path

from core.control.service import ControlPlane
from core.errors import NotFound, WorktreeRefused
from core.ports import Operations

REMOTE = "the worktree is on the worker's host"


async def worktree_of(control: Operations, ref: str) -> Path:
    """The directory of task `ref`'s worktree on this host; refused, saying why, when
    there is none here (attached to a remote control plane, or not created yet or removed)."""
    if not isinstance(control, ControlPlane):
        raise WorktreeRefused(
            f"{REMOTE}: this cockpit is attached to a remote t25 serve",
            hint="open a shell there: t25 shell ID, on the host whose workers run the task",
        )
    task = await control.task(ref)
    path = control.worktrees(task.project).path_for(task.id)
    if not path.is_dir():
        raise NotFound(
            f"{task.id} has no worktree ({path})",
            hint="a worktree is made when its first stage runs, and removed after a merge or "
            "a cancel",
        )
    return path


def shell_argv(env: Mapping[str, str]) -> list[str]:
    """The operator's login shell ($SHELL), else /bin/sh."""
    return [env.get("SHELL") or "/bin/sh"]


def editor_argv(env: Mapping[str, str]) -> list[str]:
    """The operator's editor on the worktree: $VISUAL, else $EDITOR, else vi, opened on `.`.
    The variable may hold arguments (`code --wait`), split as a shell would split them."""
    editor = env.get("VISUAL") or env.get("EDITOR") or "vi"
    return [*shlex.split(editor), "."]
