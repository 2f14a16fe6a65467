"""The log read a chunk at a time gives the lines a whole read split on `\\n` gives, wherever
the chunks end: separators inside lines, empty lines, a torn last line, a cut-off end."""

from __future__ import annotations

from pathlib import Path

import pytest

from core.control import audit_reading
from core.control.audit_reading import lines_of, lines_of_path

DATA = (
    '{"a": "\u00e9t\u00e9"}\n'.encode()
    + b"\n"
    + "ana\u2028bo\u2029cy\x85\n".encode()
    + b"\xff\xfe broken utf-8\n"
    + b'{"torn": "no newl'
)


def whole(data: bytes) -> list[tuple[int, str]]:
    pieces = data.split(b"\n")
    if pieces[-1] == b"":
        pieces.pop()
    return [(n, p.decode("utf-8", errors="replace")) for n, p in enumerate(pieces, start=1)]


@pytest.mark.parametrize("chunk", [1, 2, 3, 7, 64, 1 << 20])
def test_chunks_give_the_lines_of_a_whole_read(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, chunk: int
):
    monkeypatch.setattr(audit_reading, "CHUNK", chunk)
    path = tmp_path / "audit.jsonl"
    path.write_bytes(DATA)
    with open(path, "rb") as fh:
        assert list(lines_of(fh)) == whole(DATA)
        end = DATA.index(b'{"torn"')
        assert list(lines_of(fh, end)) == whole(DATA[:end])
    assert list(lines_of_path(path, after=2)) == whole(DATA)[2:]
    assert list(lines_of_path(tmp_path / "missing")) == []
