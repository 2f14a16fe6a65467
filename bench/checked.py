"""What every bench does before it prints a figure: checks that the work it timed happened.

A bench imports it by its bare name (`from checked import happened`): a script's own folder
is the first place Python looks for a module.
"""

from __future__ import annotations

import sqlite3
import subprocess
import sys
from pathlib import Path


def happened(work_happened: bool, what: str) -> None:
    """Exit non-zero, saying `what` (what did not happen), unless `work_happened`."""
    if not work_happened:
        raise SystemExit(f"{what}: the figures would not be what they say")


def sqlite_count(db: Path, sql: str, *params: object) -> int:
    """The one number `sql` (a `SELECT count(…)`) answers on the SQLite store at `db`."""
    with sqlite3.connect(db) as con:
        return int(con.execute(sql, params).fetchone()[0])


def tracked_files(repo: Path) -> int:
    """How many files git tracks in the checkout at `repo`."""
    listed = subprocess.run(["git", "ls-files", "-z"], cwd=repo, capture_output=True, check=True)
    return listed.stdout.count(b"\0")


def interpreter(python: str = sys.executable) -> str:
    """The Python at `python` and how fast it runs Python code. A ratio of T25 (Python) to git
    or Postgres (C) moves with it: on one machine, pyenv's default build of CPython 3.11
    (`--enable-shared`, no profile-guided optimization) ran this loop in 34.6 ms and Debian's
    in 12.7 ms, and T25's time moved with it, while git's did not."""
    code = (
        "import platform, timeit; print(platform.python_version(), "
        "min(timeit.repeat('sum(range(10**6))', number=1, repeat=5)))"
    )
    said = subprocess.run([python, "-c", code], capture_output=True, text=True, check=True)
    version, loop = said.stdout.split()
    return f"Python {version} ({python}): sum(range(10**6)) in {float(loop) * 1000:.1f} ms"
