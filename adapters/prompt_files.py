"""How a prompt reaches an agent CLI: inline when small; a big one through a 0600 temp file
outside the worktree, removed afterwards, and swept up by the next T25 if a killed one left it.
"""

from __future__ import annotations

import contextlib
import logging
import os
import re
import tempfile
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

from core.domain.pids import alive

log = logging.getLogger("t25.adapters")

# Above this many bytes a prompt goes through a file: one argv element is limited to 128 KiB
# on Linux, and a long argv is visible to every user in `ps`.
PROMPT_FILE_THRESHOLD = 100_000


@dataclass(frozen=True)
class PromptArg:
    """The prompt as the CLI receives it: inline `text`, or the `path` of a file holding it."""

    text: str | None = None
    path: Path | None = None


def inline_prompt(prompt: PromptArg) -> str:
    """The prompt as one argument, for CLIs that cannot read it from a file: a big prompt
    becomes an instruction to read the 0600 file that holds it."""
    if prompt.path is None:
        return prompt.text or ""
    return (
        f"Your complete instructions are in the file {prompt.path} (outside this "
        "directory). Read that whole file first and follow it exactly."
    )


# A prompt file's name carries the pid of the T25 process that wrote it, so one that a
# killed T25 left behind can be told from one a live T25 is using: `t25-prompt-<pid>-*.md`.
PROMPT_FILE_PREFIX = "t25-prompt-"
_PROMPT_FILE = re.compile(rf"{PROMPT_FILE_PREFIX}(\d+)-[^/]*\.md")


def _prompt_dir(cwd: Path) -> Path:
    """Where big prompts are written: the temp dir, unless that lies inside the worktree."""
    where = Path(tempfile.gettempdir()).resolve()
    return Path("/tmp") if where.is_relative_to(cwd.resolve()) else where


@contextlib.contextmanager
def prompt_arg(prompt: str, cwd: Path) -> Iterator[PromptArg]:
    """Small prompts go inline; big ones through a 0600 temp file outside the worktree,
    removed afterwards whatever happens (an agent could otherwise commit it). A T25
    killed meanwhile cannot remove it: `sweep_prompt_files` does, in the next one."""
    if len(prompt.encode()) <= PROMPT_FILE_THRESHOLD:
        yield PromptArg(text=prompt)
        return
    fd, name = tempfile.mkstemp(
        prefix=f"{PROMPT_FILE_PREFIX}{os.getpid()}-", suffix=".md", dir=_prompt_dir(cwd)
    )  # mode 0600
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as file:
            file.write(prompt)
        yield PromptArg(path=Path(name))
    finally:
        with contextlib.suppress(FileNotFoundError):
            os.unlink(name)


def sweep_prompt_files(dirs: list[Path] | None = None) -> list[Path]:
    """Remove this user's prompt files whose T25 process no longer runs; never a live
    process's (a pid that was reused keeps its file: the sweep only errs towards keeping).
    `dirs` defaults to everywhere `prompt_arg` writes."""
    if dirs is None:
        dirs = [Path(tempfile.gettempdir()).resolve(), Path("/tmp")]
    removed = []
    for where in dict.fromkeys(dirs):
        for path in where.glob(f"{PROMPT_FILE_PREFIX}*.md"):
            owner = _PROMPT_FILE.fullmatch(path.name)
            with contextlib.suppress(OSError):  # gone meanwhile, or not ours to remove
                if owner and path.lstat().st_uid == os.getuid() and not alive(int(owner[1])):
                    path.unlink()
                    removed.append(path)
    if removed:
        log.info("removed %d prompt file(s) left by T25 processes that were killed", len(removed))
    return removed
