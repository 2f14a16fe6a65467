"""Another process holding a SQLite store's file lock, and letting it go."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path


def hold_exclusive_lock(path: Path) -> subprocess.Popen:
    """Another process holding BEGIN EXCLUSIVE on the file until its stdin says go."""
    holder = subprocess.Popen(
        [sys.executable, "-c", HOLD_LOCK, str(path)],
        text=True,
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
    )
    assert holder.stdout.readline().strip() == "locked"
    return holder


def let_go(holder: subprocess.Popen) -> None:
    holder.stdin.write("\n")
    holder.stdin.close()
    assert holder.wait(timeout=30) == 0
    holder.stdout.close()


HOLD_LOCK = """
import sqlite3, sys
db = sqlite3.connect(sys.argv[1], isolation_level=None)
db.execute("BEGIN EXCLUSIVE")
print("locked", flush=True)
sys.stdin.readline()
db.execute("ROLLBACK")
"""
