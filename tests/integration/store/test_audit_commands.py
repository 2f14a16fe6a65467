"""`t25 audit export`, `checkpoint` and `verify --against`, through the binary, on each store:
the export verifies on its own, and a checkpoint kept outside T25 catches a rewrite of both
the log and the store that verifies as a chain."""

from __future__ import annotations

import asyncio
import csv
import io
import json
import sqlite3
from datetime import timedelta
from pathlib import Path

import asyncpg
import pytest
import yaml

from core.control.audit_lines import GENESIS, encode, seal, verify_lines
from core.control.keyring import KEY_FILE, Keyring
from core.domain.audit import AuditEntry
from core.domain.models import AuditAnchor
from tests.support.backends import PostgresBackend


def _decide(t25, repo: Path, url: str) -> None:
    (repo / "t25.yaml").write_text(
        yaml.safe_dump({"projects": [{"name": "shop", "repo": "."}], "store": {"url": url}})
    )
    for n in range(3):
        assert t25("task", "new", f"task {n}").code == 0
    assert t25("cancel", "T-1", "--reason", 'not now, "quoted"').code == 0
    assert t25("cancel", "T-2").code == 0
    assert t25("archive", "T-1").code == 0


def _forged(lines: list[str], keys: Keyring | None) -> list[str]:
    """The same decisions re-sealed a second later each: a chain whose decisions still match
    the store's, but not the one that was checkpointed. Sealed with T25's key when the
    forger holds it (then it verifies as a chain), else with its hashes only."""
    out, prev = [], GENESIS
    for n, raw in enumerate(lines, start=1):
        entry = AuditEntry.model_validate_json(raw)
        fields = {
            "actor": entry.actor,
            "task": entry.task,
            "decision": entry.decision,
            "reason": entry.reason,
        }
        sealed = seal(n, prev, entry.ts + timedelta(seconds=1), fields, keys)
        out.append(encode(sealed)[:-1].decode())
        prev = str(sealed["hash"])
    return out


def _checks(t25, repo: Path) -> tuple[str, list[str]]:
    """The checkpoint, and the export: it verifies on its own, from the checkpoint."""
    kept = t25("audit", "checkpoint")
    assert kept.code == 0, kept.err
    seq, digest = kept.out.split()
    assert int(seq) == 3 and len(digest) == 64
    assert json.loads(t25("audit", "checkpoint", "--json").out) == {
        "seq": 3,
        "hash": digest,
    }
    exported = t25("audit", "export")
    assert exported.code == 0, exported.err
    lines = exported.out.splitlines()
    assert len(lines) == 3
    verdict = verify_lines(enumerate(lines, start=1), AuditAnchor(seq=3, hash=digest))
    assert verdict.ok, verdict.message

    table = list(csv.DictReader(io.StringIO(t25("audit", "export", "--format", "csv").out)))
    assert [(r["seq"], r["decision"], r["task"]) for r in table] == [
        ("1", "cancel", "T-1"),
        ("2", "cancel", "T-2"),
        ("3", "archive", "T-1"),
    ]
    assert table[0]["reason"] == 'not now, "quoted"' and table[2]["hash"] == digest
    assert len(t25("audit", "export", "--since", "2").out.splitlines()) == 2
    second = AuditEntry.model_validate_json(lines[1]).ts.isoformat()
    assert len(t25("audit", "export", "--since", second).out.splitlines()) == 2
    assert t25("audit", "export", "--since", "yesterday").code == 2

    for printed in (kept.out.strip(), f"{seq}:{digest}"):
        held = t25("audit", "verify", "--against", printed)
        assert held.code == 0 and "checkpoint 3" in held.out, held.err
    assert t25("audit", "verify", "--against", seq, digest).code == 0
    return kept.out.strip(), lines


def _caught(t25, checkpoint: str, held_key: bool) -> None:
    plain = t25("audit", "verify")
    if not held_key:  # without T25's key no rewrite is a chain that holds: no checkpoint needed
        assert plain.code == 1, plain.out
        assert "line 1: carries no seal" in plain.err and "without T25's key" in plain.err
        return
    assert plain.code == 0, plain.err  # the rewrite by a holder of the key is a chain ...
    caught = t25("audit", "verify", "--against", checkpoint)
    assert caught.code == 1  # ... and the checkpoint catches it, in one line
    digest = checkpoint.split()[1]
    expected = (
        f"CHECKPOINT: line 3 does not have the checkpoint's hash {digest}: the log and the "
        "store were rewritten since it was taken"
    )
    assert caught.err.strip().splitlines() == [expected]
    longer = t25("audit", "verify", "--against", f"9:{checkpoint.split()[1]}")
    assert longer.code == 1 and "the chain ends at line 3" in longer.err


@pytest.mark.parametrize("held_key", [False, True], ids=["without-the-key", "with-the-key"])
def test_a_rewrite_of_the_log_and_the_sqlite_store_is_caught(t25, repo, held_key):
    db = repo / ".factory" / "t25.db"
    _decide(t25, repo, f"sqlite:///{db}")
    checkpoint, lines = _checks(t25, repo)

    forged = _forged(lines, _key(repo) if held_key else None)
    (repo / ".factory" / "audit.jsonl").write_text("".join(line + "\n" for line in forged))
    con = sqlite3.connect(db)
    with con:
        con.execute("UPDATE audit_anchor SET hash = ?", (json.loads(forged[-1])["hash"],))
    con.close()
    _caught(t25, checkpoint, held_key)


def _key(repo: Path) -> Keyring:
    return Keyring.open(repo / KEY_FILE)


@pytest.mark.postgres
@pytest.mark.parametrize("held_key", [False, True], ids=["without-the-key", "with-the-key"])
def test_a_rewrite_of_the_chain_in_postgres_and_its_mirror_is_caught(
    t25, repo, pg_template, held_key
):
    backend = PostgresBackend(pg_template)
    asyncio.run(backend.create())
    try:
        _decide(t25, repo, backend.url)
        checkpoint, lines = _checks(t25, repo)
        forged = _forged(lines, _key(repo) if held_key else None)
        asyncio.run(_rewrite(backend.url, forged))
        (repo / ".factory" / "audit.jsonl").write_text("".join(line + "\n" for line in forged))
        _caught(t25, checkpoint, held_key)
    finally:
        asyncio.run(backend.drop())


async def _rewrite(url: str, forged: list[str]) -> None:
    con = await asyncpg.connect(url)
    try:
        async with con.transaction():
            for n, line in enumerate(forged, start=1):
                digest = json.loads(line)["hash"]
                await con.execute(
                    "UPDATE audit_chain SET line = $2, hash = $3 WHERE seq = $1", n, line, digest
                )
            await con.execute("UPDATE audit_anchor SET hash = $1", json.loads(forged[-1])["hash"])
    finally:
        await con.close()
