"""Artifacts too large to hold at once: stored from a file and read back a chunk at a time.

A run's log may be tens of MiB. Both backends store such content as numbered chunks of
`CHUNK_BYTES` (migration 0011, `blob_chunks`) under the SHA-256 of the whole, which is
known before the first chunk is written (`file_digest`); the file is read again as it is
stored, and a file that changed meanwhile is refused (`file_chunks`). Reading streams the
chunks back and re-hashes them as they pass (`verified`): the SHA-256 check on read holds
for a streamed artifact as for a small one, and is raised after the last chunk.
"""

from __future__ import annotations

import asyncio
import hashlib
from collections.abc import AsyncIterator
from pathlib import Path

from core.domain.models import Artifact
from core.errors import ArtifactCorrupted
from store._checks import HASH_INLINE_MAX, sha256

CHUNK_BYTES = 1 << 20  # one row of blob_chunks


def chunk_count(size: int) -> int:
    """How many chunks content of `size` bytes is stored as."""
    return -(-size // CHUNK_BYTES)


async def _read(file_path: Path, offset: int) -> bytes:
    def read() -> bytes:
        with open(file_path, "rb") as file:
            file.seek(offset)
            return file.read(CHUNK_BYTES)

    return await asyncio.to_thread(read)


async def file_digest(path: Path) -> tuple[str, int]:
    """(the hex SHA-256, the size) of a file's content, read a chunk at a time off the loop."""

    def digest() -> tuple[str, int]:
        hashed, size = hashlib.sha256(), 0
        with open(path, "rb") as file:
            while chunk := file.read(CHUNK_BYTES):
                hashed.update(chunk)
                size += len(chunk)
        return hashed.hexdigest(), size

    return await asyncio.to_thread(digest)


async def file_chunks(path: Path, sha256: str) -> AsyncIterator[bytes]:
    """The file's content in chunks of `CHUNK_BYTES`; after the last, ArtifactCorrupted if
    it no longer hashes to `sha256` (it changed while it was being stored)."""
    hashed, offset = hashlib.sha256(), 0
    while chunk := await _read(path, offset):
        hashed.update(chunk)
        offset += len(chunk)
        yield chunk
    if hashed.hexdigest() != sha256:
        raise ArtifactCorrupted(
            f"{path} changed while it was being stored",
            hint="nothing was stored; store it again once nothing writes to it",
        )


async def verified(
    artifact: Artifact, chunks: AsyncIterator[bytes], *, changed_outside: str
) -> AsyncIterator[bytes]:
    """`chunks`, passed on as they come and hashed; after the last, ArtifactCorrupted unless
    they are the artifact's size and hash to its SHA-256."""
    hashed, size = hashlib.sha256(), 0
    async for chunk in chunks:
        if len(chunk) > HASH_INLINE_MAX:
            await asyncio.to_thread(hashed.update, chunk)
        else:
            hashed.update(chunk)
        size += len(chunk)
        yield chunk
    actual = hashed.hexdigest()
    if actual != artifact.sha256 or size != artifact.size:
        raise ArtifactCorrupted(
            f"artifact {artifact.id} is corrupted: its content hashes to {actual} "
            f"({size} bytes), but it was stored as {artifact.sha256} ({artifact.size} bytes)",
            hint=f"{changed_outside} was changed outside T25; re-run the stage that produced it",
        )


async def whole(chunks: AsyncIterator[bytes]) -> bytes:
    """Every chunk, joined: for content known to be small."""
    return b"".join([chunk async for chunk in chunks])


async def prepared(content: bytes | Path) -> tuple[str, int, bytes | None]:
    """Content's SHA-256 and size, read before any transaction, and the content itself
    when it is stored whole (bytes, or a file of one chunk at most); None for a file over
    one chunk, stored from the file in chunks (`file_chunks`)."""
    if isinstance(content, Path):
        digest, size = await file_digest(content)
        if size > CHUNK_BYTES:
            return digest, size, None
        content = await whole(file_chunks(content, digest))
    return await sha256(content), len(content), content
