"""The audit log as a reader sees it: its lines, and whether the chain holds.

`core.control.audit` writes and verifies the log; these are the values it hands to the
faces (the command line, the cockpit, REST), so that a face reads the log without
holding it.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime

from pydantic import BaseModel, ConfigDict

from core.domain.models import AuditAnchor


class AuditEntry(BaseModel):
    """One line of the log: a decision (or T25's `void` of one), chained to the line before."""

    model_config = ConfigDict(frozen=True, extra="forbid", defer_build=True)

    seq: int
    ts: datetime
    actor: str
    task: str | None
    decision: str
    reason: str
    prev: str
    hash: str
    bound_to: str | None = None
    voids: int | None = None
    mac: str | None = None  # T25's seal of `hash` (core.control.audit_lines)

    def anchor(self) -> AuditAnchor:
        return AuditAnchor(seq=self.seq, hash=self.hash)


@dataclass(frozen=True)
class Verdict:
    """The outcome of `t25 audit verify`: ok, or the first bad line and what is wrong; and
    the chain's head as verified (`t25 audit checkpoint` prints it to be kept elsewhere)."""

    ok: bool
    lines: int
    message: str
    bad_line: int | None = None
    head: AuditAnchor | None = None
    # Not a fault: the log of an earlier T25 waits to be taken over by the store's chain.
    pending: bool = False


@dataclass(frozen=True)
class ChainLine:
    """One line of the chain as a store that keeps the chain holds it: its text exactly as
    hashed and mirrored, with its place, hash, task and time beside it for reading."""

    seq: int
    text: str  # the line's JSON, without its newline
    hash: str
    task: str | None
    at: datetime


class AuditTrail(BaseModel):
    """The entries a reader asked for, oldest first, and the whole chain's verdict."""

    model_config = ConfigDict(frozen=True, defer_build=True)

    entries: list[AuditEntry]
    verdict: Verdict
    next: int | None = None  # a page's cursor: the `after` that reads on; None at the end
