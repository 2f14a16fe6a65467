"""Numbered schema migrations, one directory of SQL files per dialect.

Each file is `NNNN_name.sql`; the number is the migration's id, the same id in every
dialect. Ids start at 1 and have no gaps, so "which migrations has this database
seen" is a set the code can compare with what it knows. A backend applies the
pending ones in order, each in its own transaction, and records each in
`schema_migrations(id, name, applied_at)`.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from importlib import resources

_FILE_NAME = re.compile(r"^(?P<id>\d{4})_(?P<name>[a-z0-9_]+)\.sql$")


@dataclass(frozen=True)
class Migration:
    """One schema step: its id, its name (from the file name) and its SQL."""

    id: int
    name: str
    sql: str


def load(dialect: str) -> list[Migration]:
    """The dialect's migrations in id order; a broken numbering is a packaging bug."""
    folder = resources.files(__name__).joinpath(dialect)
    found: list[Migration] = []
    for entry in folder.iterdir():
        m = _FILE_NAME.match(entry.name)
        if m is None:
            continue
        found.append(Migration(int(m["id"]), m["name"], entry.read_text(encoding="utf-8")))
    found.sort(key=lambda mig: mig.id)
    ids = [mig.id for mig in found]
    if ids != list(range(1, len(ids) + 1)):
        raise RuntimeError(
            f"the {dialect} migrations are not numbered 1..{len(ids)} without gaps: {ids}"
        )
    return found
