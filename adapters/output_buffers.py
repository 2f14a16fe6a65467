"""What is kept of a child's output: each stream's head and tail for reading its result
(`Capped`), and its log, byte-exact from the start up to a limit, spooled to disk past what is
held in memory (`LogHead`); with the last bytes of both streams whatever was cut.
"""

from __future__ import annotations

import asyncio
import contextlib
import hashlib
import tempfile
from collections.abc import Callable
from pathlib import Path
from typing import BinaryIO, TypeVar

from core.domain.agent import RunLog
from core.domain.output import truncation_marker
from core.errors import DiskFull, T25Error, disk_full, out_of_space
from core.workspace.git import unstoppable

# What a run's log holds in memory while the run goes on; the rest waits on disk (`LogHead`).
SPILL_BYTES = 2**20
# The last bytes of both streams interleaved, however much came: where a QA check's
# failure summary is, when its log was cut long before.
TAIL_BYTES = 65536

T = TypeVar("T")


class Capped:
    """A byte buffer that keeps the first and the last `limit / 2` bytes of what it is fed.

    The head holds how a run started (the CLI's init event), the tail how it ended (its final
    result); a marker line in between says how much was dropped.
    """

    def __init__(self, limit: int) -> None:
        self.half = max(limit // 2, 1)
        self.head = bytearray()
        self.tail = bytearray()
        self.dropped = 0

    def add(self, chunk: bytes) -> None:
        room = self.half - len(self.head)
        if room > 0:
            self.head += chunk[:room]
            chunk = chunk[room:]
        self.tail += chunk
        if len(self.tail) > 2 * self.half:  # trim in batches, not on every chunk
            excess = len(self.tail) - self.half
            del self.tail[:excess]
            self.dropped += excess

    def value(self) -> bytes:
        fits = not self.dropped and len(self.head) + len(self.tail) <= 2 * self.half
        tail = self.tail if fits else self.tail[-self.half :]
        dropped = self.dropped + len(self.tail) - len(tail)
        if not dropped:
            return bytes(self.head + tail)
        marker = f"\n[t25: {dropped} bytes of output dropped here]\n".encode()
        return bytes(self.head) + marker + bytes(tail)


class LogHead:
    """The first `limit` bytes of what it is fed, byte-exact; past them, a truncation marker.

    A run's log: what an operator reads to see what the agent did, so it is kept as it came,
    from the start. While the run goes on it is held in memory only up to `SPILL_BYTES`;
    the rest is written (off the event loop) to a file. With a `spool` path (an agent's
    run) that file is the log: `spooled()` finishes it and says where it is, how big, and
    its SHA-256, hashed as it was written; nothing reads it back. Without one (a version
    probe, a QA check) the file is an unnamed temporary one, read back once, in one piece,
    by `value()`; without room on disk the log stays in memory.
    """

    def __init__(self, limit: int, spool: Path | None = None) -> None:
        self.limit = max(limit, 1)
        self.spool = spool
        self.seen = 0  # bytes fed
        self.kept = 0  # bytes kept: at most `limit`
        self.size = 0  # bytes of the log: what was kept, and the marker once it is added
        self.hash = hashlib.sha256()  # of the log, as it is written
        self.buffer = bytearray()
        self.file: BinaryIO | None = None
        self.held: list[bytes] = []  # what could not be written to the file
        self.on_disk = True
        self.refused: OSError | None = None  # why the disk took no more of it
        self.lock = asyncio.Lock()  # spills in the order they were taken
        self.last = bytearray()  # the last TAIL_BYTES fed, kept or not

    @property
    def tail(self) -> bytes:
        return bytes(self.last[-TAIL_BYTES:])

    @property
    def truncated(self) -> bool:
        return self.seen > self.limit

    async def add(self, chunk: bytes) -> None:
        self.seen += len(chunk)
        self.last += chunk[-TAIL_BYTES:]
        if len(self.last) > 2 * TAIL_BYTES:  # trimmed in batches, not on every chunk
            del self.last[:-TAIL_BYTES]
        room = self.limit - self.kept
        if room <= 0:
            return
        part = chunk[:room]
        self.kept += len(part)
        self._append(part)
        if len(self.buffer) >= SPILL_BYTES:
            await self._spill()

    def _append(self, part: bytes) -> None:
        self.size += len(part)
        self.hash.update(part)
        self.buffer += part

    def _mark(self) -> None:
        """The truncation marker after what was kept, when that was not all (once)."""
        if self.truncated:
            self._append(truncation_marker(self.limit, self.limit).encode())
            self.seen = self.kept

    def _open(self) -> None:
        """Open the file, kept on `self` at once: a cancellation that lands meanwhile still
        finds it to close."""
        if self.spool is None:
            self.file = _unnamed_file()
        else:
            self.file = open(self.spool, "wb", buffering=0)  # noqa: SIM115 - closed by `close`

    async def _spill(self) -> None:
        pending = bytes(self.buffer)
        self.buffer.clear()
        async with self.lock:
            if self.on_disk:
                try:
                    if self.file is None:
                        await _off_loop(self._open)
                    assert self.file is not None
                    await _off_loop(self.file.write, pending)
                    return
                except OSError as exc:  # no room: the rest stays in memory
                    self.on_disk, self.refused = False, exc
            self.held.append(pending)

    async def value(self) -> bytes:
        """What was kept, and the marker when that was not all, as one `bytes`: read back
        from the file in one piece when it spilled to one."""
        self._mark()
        if self.file is not None:
            await self._spill()  # the rest, after what is on disk
        return await _off_loop(self._whole)

    async def spooled(self) -> RunLog:
        """The log written to its `spool` file to the end, the marker after it when it was
        cut (the file exists even for an empty log). A disk that refused it fails the run,
        not the process: DiskFull when it had no room, T25Error otherwise."""
        assert self.spool is not None, "a log kept in memory is read by value()"
        self._mark()
        try:
            if self.file is None:
                await _off_loop(self._open)
            await self._spill()
        except OSError as exc:  # the file could not even be created
            self.refused = exc
        if self.refused is not None:
            what = f"could not write the run's log to {self.spool}"
            if out_of_space(self.refused):
                raise DiskFull(
                    disk_full(what, self.spool), hint="free space, then retry the task"
                ) from self.refused
            raise T25Error(f"{what}: {self.refused.strerror or self.refused}") from self.refused
        return RunLog(path=self.spool, size=self.size, sha256=self.hash.hexdigest())

    def _whole(self) -> bytes:
        on_file = b""
        if self.file is not None:
            self.file.seek(0)
            on_file = self.file.read()
        if not self.held and not self.buffer:
            return on_file
        return b"".join([on_file, *self.held, self.buffer])

    def close(self) -> None:
        if self.file is not None:
            self.file.close()

    def discard(self) -> None:
        """Close the file and, when it is a named spool, remove it: the run will not report it."""
        self.close()
        if self.spool is not None:
            with contextlib.suppress(FileNotFoundError):
                self.spool.unlink()


async def _off_loop(call: Callable[..., T], *args: object) -> T:
    """`call(*args)` in a thread, waited for to its end even when the caller is cancelled
    meanwhile (a write to the log must not overlap the next), then the cancellation goes on."""
    done = asyncio.ensure_future(asyncio.to_thread(call, *args))
    await unstoppable(lambda: asyncio.wait([done]))
    return done.result()


def _unnamed_file() -> BinaryIO:
    """A file no one else can name (unlinked at once), unbuffered: read back in one piece."""
    return tempfile.TemporaryFile(prefix="t25-log-", buffering=0)
