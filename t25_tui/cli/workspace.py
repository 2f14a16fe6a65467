"""`t25 shell ID`: the operator's shell, or editor, in a task's worktree.

The same directory and the same program as the cockpit's `shell` and `editor` keys
(t25_tui.tui.workspace). T25 waits for it and exits with its status.
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys

from core.domain.text import printable
from core.errors import NotFound
from t25_tui.cli.context import run
from t25_tui.tui.workspace import editor_argv, shell_argv, worktree_of


def shell(args: argparse.Namespace) -> int:
    path = run(args, lambda control: worktree_of(control, args.id))
    argv = editor_argv(os.environ) if args.editor else shell_argv(os.environ)
    print(f"t25: {printable(argv[0])} in {path}; exit it to come back", file=sys.stderr)
    try:
        return subprocess.run(argv, cwd=path, check=False).returncode
    except FileNotFoundError:
        raise NotFound(
            f"{argv[0]} is not a program on PATH",
            hint="set SHELL (or VISUAL or EDITOR, for --editor) to one",
        ) from None
