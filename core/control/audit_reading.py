"""The audit log file read a chunk at a time: its numbered lines, never the whole file at once.

A million lines are some 250 MB; reading them whole, then splitting them into a list of
strings, held copies of the whole log at once. Lines are split on `\\n` alone (U+2028,
U+2029 and U+0085 are characters), a last piece without its newline being a line too.
"""

from __future__ import annotations

import os
from collections.abc import Generator, Iterator
from itertools import islice
from pathlib import Path
from typing import BinaryIO

CHUNK = 1 << 20  # bytes read at a time


def lines_of(fh: BinaryIO, end: int | None = None) -> Iterator[tuple[int, str]]:
    """The numbered lines of an open log up to byte `end` (None: as far as it goes), read
    from its start by position (the handle's own position is left alone)."""
    fd, pos, number, rest = fh.fileno(), 0, 0, b""
    while end is None or pos < end:
        chunk = os.pread(fd, CHUNK if end is None else min(CHUNK, end - pos), pos)
        if not chunk:
            break
        pos += len(chunk)
        pieces = (rest + chunk).split(b"\n")
        rest = pieces.pop()
        for piece in pieces:
            number += 1
            yield number, piece.decode("utf-8", errors="replace")
    if rest:
        yield number + 1, rest.decode("utf-8", errors="replace")


def lines_of_path(path: Path, *, after: int = 0) -> Iterator[tuple[int, str]]:
    """The numbered lines of the log at `path` after line `after` (none when it is missing)."""
    try:
        fh = open(path, "rb")  # noqa: SIM115 - closed when the lines are
    except FileNotFoundError:
        return
    with fh:
        yield from islice(lines_of(fh), after, None)


def pages(
    lines: Iterator[tuple[int, str]], size: int
) -> Generator[list[tuple[int, str]], None, None]:
    """`lines` in lists of at most `size`."""
    while page := list(islice(lines, size)):
        yield page
