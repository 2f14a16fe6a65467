"""Right after an upgrade from a T25 that kept the audit chain in `.factory/audit.jsonl`
with only its anchor in Postgres, the store holds the anchor and no chain (migration 0005
adds the chain's table empty). `t25 audit verify` takes the log over itself, as the next
decision would, and verifies; on a checkout whose log cannot be taken over it says so,
never TAMPERED."""

from __future__ import annotations

import asyncio
from collections.abc import Iterator
from pathlib import Path

import asyncpg
import pytest
import yaml

from tests.support.backends import PostgresBackend
from tests.support.repos import make_repo

pytestmark = pytest.mark.postgres


@pytest.fixture
def db(pg_template: str) -> Iterator[PostgresBackend]:
    backend = PostgresBackend(pg_template)
    asyncio.run(backend.create())
    yield backend
    asyncio.run(backend.drop())


def _checkout(path: Path, url: str) -> Path:
    repo = make_repo(path, exclude_factory=True)
    config = {
        "projects": [{"name": "shop", "repo": "."}],
        "store": {"url": url},
        "audit": {"key_file": str(path.parent / "shared-audit.key")},
    }
    (repo / "t25.yaml").write_text(yaml.safe_dump(config))
    return repo


async def _sql(url: str, statement: str) -> None:
    con = await asyncpg.connect(url)
    try:
        await con.execute(statement)
    finally:
        await con.close()


def test_verify_takes_the_older_log_over_or_says_it_has_not_yet(t25, tmp_path, db):
    first = _checkout(tmp_path / "first", db.url)
    other = _checkout(tmp_path / "other", db.url)
    for step in (("task", "new", "a"), ("task", "new", "b"), ("cancel", "T-1"), ("cancel", "T-2")):
        assert t25(*step, cwd=first).code == 0
    assert t25("archive", "T-1", cwd=first).code == 0
    # As the earlier T25 left it: its log in the checkout, its anchor in the store, no chain.
    asyncio.run(_sql(db.url, "DELETE FROM audit_chain"))

    elsewhere = t25("audit", "verify", cwd=other)  # its log is not the one anchored
    assert elsewhere.code == 1
    assert "TAMPERED" not in elsewhere.err and "ok" not in elsewhere.out
    assert elsewhere.err.startswith("NOT YET VERIFIABLE: ")
    assert "has not been taken over into the store yet" in elsewhere.err

    taken = t25("audit", "verify", cwd=first)
    assert taken.code == 0, taken.err
    assert "ok: " in taken.out and "3 entries in the store's chain, chain intact" in taken.out

    mirrored = t25("audit", "verify", cwd=other)  # the chain is in the store now
    assert mirrored.code == 0, mirrored.err
    assert "3 entries in the store's chain" in mirrored.out
    assert t25("cancel", "T-2", cwd=other).code != 0  # it is cancelled already
    assert t25("task", "new", "c", cwd=other).code == 0
    assert t25("cancel", "T-3", cwd=other).code == 0
    assert t25("audit", "verify", cwd=first).code == 0
