"""The commands that must answer at once (`t25 task list`, the completion's task ids) read
the default store with the standard library alone (store.quick) when they can: this says
when. Nothing here imports the schema, pydantic or asyncio."""

from __future__ import annotations

import argparse
import re
from pathlib import Path

# A top-level `store:` in t25.yaml names another store: then the full path reads it.
_NAMES_A_STORE = re.compile(r"^store\s*:", re.MULTILINE)


def default_sqlite(args: argparse.Namespace) -> Path | None:
    """The default SQLite store beside the nearest t25.yaml (no --config, no
    T25_DATABASE_URL, no `store:` key); None when the full path must decide."""
    from core.config import held_secrets
    from core.config.locate import find_config
    from core.errors import T25Error

    if args.config or held_secrets.get(held_secrets.DATABASE_URL):
        return None
    try:
        config = find_config(Path.cwd())
    except T25Error:
        return None  # the full path says what is wrong
    if _NAMES_A_STORE.search(config.read_text(encoding="utf-8", errors="replace")):
        return None
    return config.parent / ".factory" / "t25.db"
