"""A real full disk: a small tmpfs mounted where the factory keeps what it writes."""

from __future__ import annotations

import os
from pathlib import Path


class FullDisk:
    """A tmpfs of a few pages at `path`, and a filler file that takes every free byte."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self.filler = path / "filler"

    def fill(self) -> None:
        fd = os.open(self.filler, os.O_WRONLY | os.O_CREAT | os.O_APPEND)
        try:
            for size in (4096, 1):  # whole pages, then the last bytes of the last one
                for _ in range(100_000):  # bounded: the tmpfs is a few pages
                    try:
                        os.write(fd, b"\0" * size)
                    except OSError:
                        break
        finally:
            os.close(fd)

    def free(self) -> None:
        self.filler.unlink()
