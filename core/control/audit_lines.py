"""An audit line's format: how a line is sealed, hashed and written, and how a chain of
them is checked — the same for the log file and for a chain kept in the store.

A line carries the hash of the line before it and its own hash over every field it holds,
so editing, deleting or reordering a line breaks the chain. The hash alone is no seal: anyone
who can write the store can compute it again over a rewritten line. So each line also carries
`mac`, T25's seal of its hash under the installation's key (core.control.keyring), which lives
outside the store and every sandbox; a line written since the key was made without a seal,
or with one that is not T25's, fails the check whatever its hash says. The hash is taken over a
canonical form (sorted keys, no spaces, unescaped), so it does not depend on how a line is
escaped on disk; a line is written as ASCII JSON. Optional fields are written only when
set (`bound_to`, `voids`), so lines written before they existed verify as they always did.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Iterable, Mapping
from datetime import datetime

from core.control.keyring import Keyring
from core.domain.audit import AuditEntry, ChainLine, Verdict
from core.domain.models import AuditAnchor
from core.domain.verbs import Verb

GENESIS = "0" * 64
DECISIONS = frozenset(verb.value for verb in Verb)
OPTIONAL = frozenset({"bound_to", "voids"})  # written only when set
MAC = "mac"  # T25's seal of the line's hash: outside what the hash covers
VOID = "void"  # T25's own line: the decision on line `voids` did not take effect
T25_ACTOR = "t25"
# Said of lines past the anchor: what voids them, when a stopped decider left them.
SETTLED = (
    "; if a T25 process was killed while deciding, the next decision or the next start of "
    "`t25 run` or `t25 serve` voids its line"
)


def digest(fields: dict[str, object]) -> str:
    # The canonical form hashed is independent of how the line is escaped on disk.
    canonical = json.dumps(fields, sort_keys=True, separators=(",", ":"), ensure_ascii=False)
    return hashlib.sha256(canonical.encode("utf-8", "surrogatepass")).hexdigest()


def seal(
    seq: int, prev: str, ts: datetime, fields: Mapping[str, object], keys: Keyring | None = None
) -> dict[str, object]:
    """A line's fields (`actor`, `task`, `decision`, `reason`, and `bound_to` and `voids`
    only when set) with its place in the chain, its time, its hash and T25's seal of it."""
    body: dict[str, object] = {"seq": seq, "ts": ts.isoformat(), "prev": prev}
    body.update((k, v) for k, v in fields.items() if v is not None or k not in OPTIONAL)
    line = {**body, "hash": digest(body)}
    if keys is not None:
        line[MAC] = keys.seal(sealed_text(str(line["hash"])))
    return line


def sealed_text(line_hash: str) -> bytes:
    """What a line's seal is a MAC of: its hash (over every other field), marked as an
    audit line's so that no other record T25 seals can pass for one."""
    return f"t25-audit-line:{line_hash}".encode()


def encode(fields: dict[str, object]) -> bytes:
    """One line as written: ASCII JSON (every other character escaped), then `\\n`."""
    return json.dumps(fields, sort_keys=True, ensure_ascii=True).encode() + b"\n"


def verify_lines(
    lines: Iterable[tuple[int, str]], anchor: AuditAnchor | None, keys: Keyring | None = None
) -> Verdict:
    """Walk the chain line by line, then hold its end against the anchor."""
    check = ChainCheck(anchor, keys)
    for number, raw in lines:
        if not check.feed(number, raw):
            break
    return check.verdict()


_REQUIRED = {"seq": int, "ts": str, "actor": str, "decision": str, "reason": str, "prev": str}
_NULLABLE = {"task": str, "hash": str, "bound_to": str, "voids": int, "mac": str}
_FIELDS = frozenset(_REQUIRED) | frozenset(_NULLABLE)


class ChainCheck:
    """The chain's verification, fed one line at a time so that a million lines need not
    be held at once, from a file or from the store alike.

    Each line is checked with `json` and `hashlib` directly, not through `AuditEntry`, and
    never held: on a million lines (bench/audit_verify.py, two runs on a shared 2-CPU
    machine) the check through `AuditEntry` alone took 20.7 and 14.2 s; the whole
    verification of the file now takes 11.9 and 9.2 s, and of the chain in Postgres with
    its mirror 17.8 and 19.0 s."""

    def __init__(self, anchor: AuditAnchor | None, keys: Keyring | None = None) -> None:
        self.anchor = anchor
        self.keys = keys  # None: seals are not checked (a reader without the key)
        self.count = 0
        self.head: AuditAnchor | None = None
        self.failure: Verdict | None = None
        self._prev = GENESIS
        self._anchored_hash: str | None = None  # the hash of line `anchor.seq`, once read

    def feed(self, number: int, raw: str) -> bool:
        """Check the next line (numbered from 1); False once the chain is broken."""
        if self.failure is not None:
            return False
        self.count = number
        try:
            fields = json.loads(raw)
        except ValueError:
            fields = None
        why = _malformed(fields)
        if why is None and isinstance(fields, dict):
            claimed = fields.pop("hash")
            mac = fields.pop(MAC, None)
            if fields["seq"] != number:
                why = f"has sequence number {fields['seq']}; lines were deleted or reordered"
            elif fields["prev"] != self._prev:
                why = "does not follow the line before it; a line was deleted, reordered or edited"
            elif digest(fields) != claimed:
                why = "its content does not match its hash; the line was edited"
            elif (unsealed := self.seal_problem(str(fields["ts"]), claimed, mac)) is not None:
                why = unsealed
            else:
                self._prev = claimed
                if self.anchor is not None and number == self.anchor.seq:
                    self._anchored_hash = claimed
                return True
        self.failure = Verdict(False, number, f"line {number}: {why}", bad_line=number)
        return False

    def seal_problem(self, ts: str, line_hash: str, mac: object) -> str | None:
        """Why a line's seal does not make it T25's own, or None. A line older than the key
        (written before T25 sealed its lines) needs none."""
        keys = self.keys
        if keys is None:
            return None
        if mac is None:
            if datetime.fromisoformat(ts) < keys.created:
                return None
            return (
                "carries no seal, though T25 has sealed every line since "
                f"{keys.created:%Y-%m-%d %H:%M:%S}: it was written without T25's key"
            )
        return keys.problem(sealed_text(line_hash), mac)

    def verdict(self) -> Verdict:
        """The chain as fed so far, held against the anchor: it must end exactly there."""
        if self.failure is not None:
            return self.failure
        count, anchor = self.count, self.anchor
        head = AuditAnchor(seq=count, hash=self._prev) if count else None
        if anchor is None:
            if count:
                return Verdict(
                    False,
                    count,
                    f"the store holds no anchor but the log has {count} lines{SETTLED}",
                    bad_line=1,
                )
            return Verdict(True, 0, "the audit log is empty")
        if count < anchor.seq:
            return Verdict(
                False,
                count,
                f"truncated: the store anchors line {anchor.seq}, the log ends at line {count}",
                bad_line=count + 1,
            )
        if self._anchored_hash != anchor.hash:
            return Verdict(
                False,
                count,
                f"line {anchor.seq}: does not match the hash anchored in the "
                "store; the log was rewritten",
                bad_line=anchor.seq,
            )
        if count > anchor.seq:
            return Verdict(
                False,
                count,
                f"line {anchor.seq + 1}: was never anchored in the store "
                f"(appended outside T25, or written by a process that stopped before "
                f"acknowledging it){SETTLED}",
                bad_line=anchor.seq + 1,
            )
        return Verdict(
            True, count, f"{count} entries, chain intact, anchored at line {count}", head=head
        )


def _malformed(fields: object) -> str | None:
    """Why a parsed line is not a well-formed audit entry (None: it is)."""
    bad = "is not a well-formed audit entry"
    if not isinstance(fields, dict) or not _FIELDS.issuperset(fields):
        return bad
    for name, kind in _REQUIRED.items():
        value = fields.get(name)
        if type(value) is not kind:
            return bad
    for name, kind in _NULLABLE.items():
        value = fields.get(name)
        if value is not None and type(value) is not kind:
            return bad
    if "task" not in fields or not isinstance(fields.get("hash"), str):
        return bad
    try:
        datetime.fromisoformat(fields["ts"])
    except ValueError:
        return bad
    return None


def as_line(entry: AuditEntry) -> str:
    """An entry as its line was written (without the newline): the same fields, the same
    hash, so an exported line verifies as the original did."""
    fields: dict[str, object] = {
        "seq": entry.seq,
        "ts": entry.ts.isoformat(),
        "prev": entry.prev,
        "actor": entry.actor,
        "task": entry.task,
        "decision": entry.decision,
        "reason": entry.reason,
        "hash": entry.hash,
    }
    fields.update((k, getattr(entry, k)) for k in OPTIONAL if getattr(entry, k) is not None)
    if entry.mac is not None:
        fields[MAC] = entry.mac
    return encode(fields)[:-1].decode("ascii")


def chain_line(fields: Mapping[str, object]) -> ChainLine:
    """A sealed line as a store that keeps the chain holds it."""
    task = fields.get("task")
    return ChainLine(
        seq=int(str(fields["seq"])),
        text=encode(dict(fields))[:-1].decode("ascii"),
        hash=str(fields["hash"]),
        task=task if isinstance(task, str) else None,
        at=datetime.fromisoformat(str(fields["ts"])),
    )
