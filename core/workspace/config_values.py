"""Values of a checkout's git config that T25's commits and stagings need: the committer's
identity (a commit supplies T25's own when the repository sets none) and the sparse-checkout
switches. They come from the one `git config` read T25 makes before its git calls anyway and
keeps until a config file changes (`core.workspace.git.kept_entries`): three `git config`
processes fewer for each commit.
"""

from __future__ import annotations

import os
from pathlib import Path

from core.workspace.git import kept_entries

Values = dict[str, str | None]  # canonical key -> its last value; None: a key without one


async def kept_values(directory: Path) -> Values:
    """The identity and sparse-checkout keys set for `directory`, the last value of each
    winning as in git."""
    return values_of(await kept_entries(directory))


def values_of(entries: bytes) -> Values:
    values: Values = {}
    for entry in filter(None, entries.split(b"\0")):
        key, newline, value = entry.partition(b"\n")
        values[os.fsdecode(key)] = os.fsdecode(value) if newline else None
    return values


def flag(values: Values, key: str) -> bool | None:
    """`key` read as git reads a boolean: None when it is not set, or not a boolean."""
    if key not in values:
        return None
    value = values[key]
    if value is None:  # `[core] sparseCheckout` with no value means true
        return True
    word = value.strip().lower()
    if word in ("true", "yes", "on"):
        return True
    if word in ("false", "no", "off", ""):
        return False
    try:
        return int(word, 0) != 0
    except ValueError:
        return None
