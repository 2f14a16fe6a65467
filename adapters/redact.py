"""Redacting T25's secrets from what an agent or a QA check prints.

No agent or check is given T25's secrets (`core.config.held_secrets`), but one may still come
by a value - pasted into a task, read from a file - and print it. Its output is streamed to
every face and kept as the run's log, so each secret value is replaced by a marker before the
output reaches either:

    [t25: redacted FACTORY_WORKER_CREDENTIAL]

What is redacted: each held value, the password of T25_DATABASE_URL (as written and
percent-decoded), and each of these as it reads inside a JSON string. A value shorter than
`MIN_LENGTH` is not: it would strike ordinary words. A transformed value (base64, reversed,
split by the agent itself) is not recognised.

Output arrives in chunks, and a value may be cut between two of them, so a stream is redacted
with a carry (`RedactedStream`): the last `longest - 1` bytes are held back until the next
chunk (or the end) shows whether they begin a secret.

    Redactor.of_held()            built from the secrets T25 holds now
    Redactor({name: value}).redact(data)
    redactor.stream().feed(chunk) -> bytes; .flush() -> bytes at the end
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping
from urllib.parse import unquote, urlsplit

from core.config import held_secrets

MIN_LENGTH = 8


def marker(name: str) -> bytes:
    return f"[t25: redacted {name}]".encode()


def _forms(name: str, value: str) -> dict[bytes, bytes]:
    """Each way `value` may appear in output, to its marker."""
    found: dict[str, str] = {value: name}
    if name == held_secrets.DATABASE_URL:
        try:
            password = urlsplit(value).password
        except ValueError:  # not a URL T25 could use either; the whole value is still redacted
            password = None
        if password:
            for form in (password, unquote(password)):
                found.setdefault(form, f"{name} password")
    for form, label in list(found.items()):
        found.setdefault(json.dumps(form)[1:-1], label)  # as it reads in a JSON string
    return {
        form.encode(): marker(label)
        for form, label in found.items()
        if len(form.encode()) >= MIN_LENGTH
    }


class Redactor:
    """Replaces T25's secret values in bytes by markers naming them."""

    def __init__(self, secrets: Mapping[str, str]) -> None:
        self.markers: dict[bytes, bytes] = {}
        for name, value in secrets.items():
            for form, mark in _forms(name, value).items():
                self.markers.setdefault(form, mark)
        longest_first = sorted(self.markers, key=len, reverse=True)
        self.pattern = (
            re.compile(b"|".join(re.escape(form) for form in longest_first))
            if longest_first
            else None
        )
        self.longest = len(longest_first[0]) if longest_first else 0

    @classmethod
    def of_held(cls) -> Redactor:
        """A redactor of the secrets T25 holds now."""
        return cls(held_secrets.values())

    def redact(self, data: bytes) -> bytes:
        if self.pattern is None:
            return data
        return self.pattern.sub(lambda found: self.markers[found.group()], data)

    def stream(self) -> RedactedStream:
        """A redactor for one stream of chunks."""
        return RedactedStream(self)


class RedactedStream:
    """One stream's redaction: what `feed` returns never holds a secret, even one cut between
    chunks; `flush` returns what was held back, once the stream has ended."""

    def __init__(self, redactor: Redactor) -> None:
        self.redactor = redactor
        self.keep = max(redactor.longest - 1, 0)
        self.carry = b""

    def feed(self, chunk: bytes) -> bytes:
        pattern = self.redactor.pattern
        if pattern is None:
            return chunk
        data = self.carry + chunk
        # A secret that starts before `cut` ends within `data`: it is seen whole now. One that
        # starts at or after it may go on in the next chunk, so those bytes wait.
        cut = len(data) - self.keep
        out = bytearray()
        done = 0
        for found in pattern.finditer(data):
            if found.start() >= cut:
                break
            out += data[done : found.start()]
            out += self.redactor.markers[found.group()]
            done = found.end()
        until = max(cut, done)
        out += data[done:until]
        self.carry = data[until:]
        return bytes(out)

    def flush(self) -> bytes:
        rest, self.carry = self.carry, b""
        return self.redactor.redact(rest)
