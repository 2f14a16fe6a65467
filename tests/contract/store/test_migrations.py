"""Migrations are one history told in two dialects: the same ids and names in each."""

from __future__ import annotations

import re
from importlib import resources

import pytest

from store import migrations

DIALECTS = ("sqlite", "postgres")


def test_every_dialect_has_the_same_migration_ids_and_names() -> None:
    histories = {d: [(m.id, m.name) for m in migrations.load(d)] for d in DIALECTS}
    assert histories["sqlite"], "no migrations shipped"
    assert histories["postgres"] == histories["sqlite"]


@pytest.mark.parametrize("dialect", DIALECTS)
def test_migration_files_are_named_and_numbered_consecutively(dialect: str) -> None:
    folder = resources.files("store.migrations").joinpath(dialect)
    names = sorted(entry.name for entry in folder.iterdir() if entry.name.endswith(".sql"))
    for expected, name in enumerate(names, start=1):
        assert re.fullmatch(r"\d{4}_[a-z0-9_]+\.sql", name), name
        assert int(name[:4]) == expected, names


# Tables only the Postgres store has: the audit chain lives in the store there, while an
# embedded SQLite store keeps it in its log file (core.control.audit).
POSTGRES_ONLY = {"audit_chain"}


def test_postgres_schema_mirrors_the_sqlite_tables() -> None:
    def tables(dialect: str) -> set[str]:
        text = "\n".join(m.sql for m in migrations.load(dialect))
        return set(re.findall(r"CREATE TABLE (\w+)", text))

    assert tables("postgres") == tables("sqlite") | POSTGRES_ONLY


@pytest.mark.parametrize("dialect", DIALECTS)
def test_0011_keeps_large_blobs_in_numbered_chunks_beside_the_whole_ones(dialect: str) -> None:
    (chunked,) = [m for m in migrations.load(dialect) if m.id == 11]
    assert chunked.name == "blob_chunks"
    sql = " ".join(chunked.sql.split())
    assert re.search(r"ALTER TABLE blobs ADD COLUMN chunks \w+ NOT NULL DEFAULT 0", sql)
    assert re.search(r"CREATE TABLE blob_chunks \( sha256 \w+ NOT NULL REFERENCES blobs", sql)
    assert "PRIMARY KEY (sha256, n)" in sql


@pytest.mark.parametrize("dialect", DIALECTS)
def test_run_requests_adds_a_json_column_to_runs_that_old_runs_read_as_none(dialect: str) -> None:
    (added,) = [m for m in migrations.load(dialect) if m.name == "run_requests"]
    sql = " ".join(added.sql.split())
    assert re.search(r"ALTER TABLE runs ADD COLUMN requests \w+ NOT NULL DEFAULT '\[\]'", sql)


@pytest.mark.parametrize("dialect", DIALECTS)
def test_0014_gives_each_run_its_cli_session_and_the_one_it_continued(dialect: str) -> None:
    (sessions,) = [m for m in migrations.load(dialect) if m.id == 14]
    assert sessions.name == "run_sessions"
    sql = " ".join(sessions.sql.split())
    assert re.search(r"ALTER TABLE runs ADD COLUMN session_id text;", sql, re.IGNORECASE)
    assert re.search(r"ALTER TABLE runs ADD COLUMN resumed_session text;", sql, re.IGNORECASE)
