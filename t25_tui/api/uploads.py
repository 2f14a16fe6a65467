"""The run logs remote workers upload to serve, a chunk at a time, before their completion.

A run's log may be tens of MiB (`limits.max_log_bytes`); it never travels in one body, and
serve never holds it whole. The worker sends it with `PUT /worker/log` under its lease, at
most `CHUNK_BYTES` a request, each from the offset serve says it has (`LogUploads.write`):
a chunk sent again because its answer was lost is kept once, and a gap is answered with
where to go on from. Serve appends it to a file of its own, one per lease, under
`.factory/uploads/`. The completion names the log by size and SHA-256; serve checks its copy
against them (`LogUploads.take`), the pipeline streams it into the store as the run's log
artifact, and the file is removed (`LogUploads.discard`). An upload whose worker never
completed is removed an hour after its last chunk, when the next upload begins.

Serve keeps at most its own `limits.max_log_bytes` of a log, and the truncation marker: a
worker configured to keep more has the rest acknowledged and dropped, and its log is cut
where serve's bound says, with the marker after it (its hash is then serve's own).
"""

from __future__ import annotations

import asyncio
import contextlib
import hashlib
import os
import time
from pathlib import Path

from core.domain.agent import RunLog
from core.domain.models import Lease
from core.domain.output import truncation_marker
from core.errors import ArtifactCorrupted, InvalidInput

CHUNK_BYTES = (
    2**20
)  # the most of a log one request carries (the admission check's cap for /worker/log)
UPLOADS = "uploads"  # under serve's `.factory/`
STALE_S = 3600.0  # an upload untouched this long is of a lease long lost: removed


class LogUploads:
    """The logs being uploaded to this serve, one file per lease under `root`."""

    def __init__(self, root: Path, limit: int) -> None:
        self.root = root
        self.limit = limit  # limits.max_log_bytes: what is kept of a log
        self.cap = limit + len(truncation_marker(limit, limit).encode())  # with its marker
        self.locks: dict[Path, asyncio.Lock] = {}

    def path(self, lease: Lease) -> Path:
        """The file of the log uploaded under `lease`."""
        return self.root / f"{lease.run_id}-{lease.token}.log"

    async def write(self, lease: Lease, offset: int, chunk: bytes) -> int:
        """Keep what is new in `chunk`, the log's bytes from `offset`; the offset to send
        from next. A chunk serve has already is kept once; one past the end of what serve
        has (a gap) is not kept, and the answer says where serve's copy ends."""
        path = self.path(lease)
        async with self.locks.setdefault(path, asyncio.Lock()):  # a retry races its first try
            return await asyncio.to_thread(self._append, path, offset, chunk)

    def _append(self, path: Path, offset: int, chunk: bytes) -> int:
        self.root.mkdir(parents=True, exist_ok=True, mode=0o700)
        if offset == 0 and not path.exists():  # a new upload: a moment to tidy up
            self._sweep()
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o600)
        with os.fdopen(fd, "ab") as file:
            have = os.fstat(fd).st_size
            if offset > have and have < self.cap:
                return have  # a gap: go on from here
            new = chunk[max(have - offset, 0) :][: max(self.cap - have, 0)]
            file.write(new)
        have += len(new)
        # Past serve's bound every byte is acknowledged and dropped (`take` cuts the log).
        return max(have, offset + len(chunk)) if have >= self.cap else have

    async def take(self, lease: Lease, sent: RunLog) -> RunLog:
        """The log uploaded under `lease`, checked against what its completion says of it
        (`sent`: the worker's size and SHA-256): InvalidInput when it is not all here,
        ArtifactCorrupted when it does not hash as the worker said. One longer than serve
        keeps is cut at serve's bound, the marker after it."""
        path = self.path(lease)
        longer = sent.size > self.cap
        try:
            sha256, size = await asyncio.to_thread(
                _cut_and_hash, path, self.limit if longer else None
            )
        except FileNotFoundError:
            raise InvalidInput(
                f"the log of {lease.run_id} was not uploaded",
                hint="a worker uploads its run's log (PUT /worker/log) before completing",
            ) from None
        if longer:
            return RunLog(path=path, size=size, sha256=sha256)
        if size != sent.size:
            raise InvalidInput(
                f"the log of {lease.run_id} is {sent.size} bytes; {size} were uploaded",
                hint="upload the rest (PUT /worker/log) before completing",
            )
        if sha256 != sent.sha256:
            raise ArtifactCorrupted(
                f"the log of {lease.run_id} arrived damaged: it does not match its SHA-256",
                hint="the run goes back to the queue once its lease lapses",
            )
        return RunLog(path=path, size=size, sha256=sha256)

    def _sweep(self) -> None:
        """Remove uploads untouched for `STALE_S`: their worker died, or lost its lease."""
        long_ago = time.time() - STALE_S
        for old in self.root.glob("*.log"):
            with contextlib.suppress(OSError):
                if old.stat().st_mtime < long_ago:
                    old.unlink()

    def discard(self, lease: Lease) -> None:
        """Remove the log uploaded under `lease`: kept in the store, or of a lease lost."""
        path = self.path(lease)
        self.locks.pop(path, None)
        with contextlib.suppress(FileNotFoundError):
            path.unlink()


def _cut_and_hash(path: Path, limit: int | None) -> tuple[str, int]:
    """(SHA-256, size) of the file, read a chunk at a time; first cut at `limit` bytes with
    the truncation marker after them, given one."""
    if limit is not None:
        with open(path, "r+b") as file:
            file.truncate(limit)
            file.seek(limit)
            file.write(truncation_marker(limit, limit).encode())
    hashed, size = hashlib.sha256(), 0
    with open(path, "rb") as file:
        while chunk := file.read(CHUNK_BYTES):
            hashed.update(chunk)
            size += len(chunk)
    return hashed.hexdigest(), size
