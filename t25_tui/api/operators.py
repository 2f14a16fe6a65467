"""Who an operator's request comes from: named tokens, each with a role.

    T25_OPERATOR_TOKENS=PATH   a file of `NAME ROLE sha256:HEX` lines (`#` starts a comment):
                               HEX is the SHA-256 of the token, so the file holds no secret
    T25_OPERATOR_TOKEN=TOKEN   the single-operator form: one operator, `operator`, an approver

Each role may do what the one before it may:

    viewer     read: every GET (the board, runs, artifacts, events, the audit log)
    operator   decide: file tasks; answer, reject, cancel, retry, archive, acknowledge
    approver   approve plans and merge

The actor of a decision made over REST is the token's name; what the request body claims is
recorded beside it, never instead. Every serve also knows its host's own operator, whose
token it makes in `.factory/operator-token` (t25_tui.api.credentials): no serve answers an
operator route without a credential, on loopback neither.
"""

from __future__ import annotations

import hashlib
import hmac
import re
from dataclasses import dataclass
from pathlib import Path

from core.errors import ConfigError

TOKENS_ENV = "T25_OPERATOR_TOKENS"
ROLES = ("viewer", "operator", "approver")
SINGLE_NAME = "operator"  # who the single T25_OPERATOR_TOKEN is
_LINE = re.compile(r"([A-Za-z0-9][A-Za-z0-9._@-]{0,63})\s+(\w+)\s+sha256:([0-9a-f]{64})")
_APPROVER_ONLY = re.compile(r"/tasks/[^/]+/(approve|merge)")


@dataclass(frozen=True)
class Operator:
    name: str
    role: str

    def refusal(self, method: str, path: str) -> str | None:
        """Why this operator may not make the request, or None when they may."""
        if method in ("GET", "HEAD"):
            return None
        needed = "approver" if _APPROVER_ONLY.fullmatch(path) else "operator"
        if ROLES.index(self.role) >= ROLES.index(needed):
            return None
        return f"{self.name} is a {self.role}; {method} {path} needs an {needed}"


class Operators:
    """The named tokens a serve accepts, by the SHA-256 of each."""

    def __init__(self, by_digest: dict[bytes, Operator]) -> None:
        self._by_digest = by_digest

    @classmethod
    def single(cls, token: str) -> Operators:
        return cls({_digest(token.encode()): Operator(SINGLE_NAME, "approver")})

    def adding(self, name: str, token: str, role: str = "approver") -> Operators:
        """These operators and one more (the serve host's own, `credentials.local_token`)."""
        return Operators({**self._by_digest, _digest(token.encode()): Operator(name, role)})

    @classmethod
    def read(cls, path: Path, token: str | None = None) -> Operators:
        """The file's operators (and the single token's, when it is set too)."""
        try:
            text = path.read_text(encoding="utf-8")
        except OSError as exc:
            raise ConfigError(
                f"{TOKENS_ENV}: cannot read {path}: {exc.strerror}",
                hint="point it at a file of `NAME ROLE sha256:HEX` lines",
            ) from exc
        by_digest = {} if token is None else dict(cls.single(token)._by_digest)
        names: set[str] = set()
        for number, raw in enumerate(text.splitlines(), start=1):
            line = raw.split("#", 1)[0].strip()
            if not line:
                continue
            found = _LINE.fullmatch(line)
            if found is None or found[2] not in ROLES:
                raise ConfigError(
                    f"{path}:{number}: expected `NAME ROLE sha256:HEX` with ROLE one of "
                    f"{', '.join(ROLES)}",
                    hint="HEX is the token's SHA-256: printf %s TOKEN | sha256sum",
                )
            name, role, digest = found[1], found[2], bytes.fromhex(found[3])
            if name in names or digest in by_digest:
                raise ConfigError(f"{path}:{number}: {name}'s name or token is listed twice")
            names.add(name)
            by_digest[digest] = Operator(name, role)
        if not by_digest:
            raise ConfigError(f"{TOKENS_ENV}: {path} names no operator")
        return cls(by_digest)

    def match(self, token: bytes) -> Operator | None:
        """The operator whose token this is; every entry compared, in constant time."""
        given = _digest(token)
        found = None
        for digest, operator in self._by_digest.items():
            if hmac.compare_digest(given, digest):
                found = operator
        return found


def _digest(token: bytes) -> bytes:
    return hashlib.sha256(token).digest()
