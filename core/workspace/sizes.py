"""The bytes of the files a change leaves: what `limits.max_file_bytes` bounds.

A binary file counts no lines in a diff, so a 256 MiB file passes every line limit; its
size at the branch's tip is read from git's own tree (no checkout, no filter run).

    largest_file(repo, tip, files) -> (path, bytes) of the largest, ("", 0) for none
"""

from __future__ import annotations

import os
from collections.abc import Sequence
from pathlib import Path

from core.workspace.git import git_bytes

BATCH = 500  # paths per `git ls-tree`: the command line stays short whatever the change


async def largest_file(repo: Path, tip: str, files: Sequence[str]) -> tuple[str, int]:
    """The largest of `files` as they are at `tip` (a deleted one is not there), and its
    bytes; ("", 0) for none. Each path is taken literally, never as a pattern."""
    best = ("", 0)
    for start in range(0, len(files), BATCH):
        named = [f":(literal){name}" for name in files[start : start + BATCH]]
        raw = await git_bytes("ls-tree", "-z", "-l", "--full-tree", tip, "--", *named, cwd=repo)
        for entry in os.fsdecode(raw).split("\0"):
            meta, _, name = entry.partition("\t")
            size = meta.split()[-1] if meta else "-"
            if size.isdigit() and int(size) > best[1]:
                best = (name, int(size))
    return best
