"""`worktrees.caches`: the directories whose untracked or ignored files do not keep a
worktree at cleanup (core.workspace.caches matches them), with the shipped default.

Here, not in the schema, so that the worktrees read the default without loading it."""

from __future__ import annotations

# What tools make again: bytecode, the test runner's, the type checker's and the linter's
# caches, tox's environments (built again from tox.ini, often the largest thing in a Python
# tree), bundlers' caches, and build output (cargo's and Maven's `target`).
DEFAULT_CACHES = (
    "__pycache__",
    ".pytest_cache",
    ".mypy_cache",
    ".ruff_cache",
    ".tox",
    "node_modules/.cache",
    "target",
)


def cache_entry_problem(entry: str) -> str | None:
    """Why `entry` cannot name cache directories (`name`, `a/b`, `/at-the-top`, parts may be
    shell patterns), or None."""
    parts = entry.strip("/").split("/")
    if not entry.strip("/"):
        return "a cache entry names a directory, never the whole tree"
    if entry.startswith("//") or any(p in ("", ".", "..") for p in parts):
        return f"{entry!r}: name directories by their names, without '.', '..' or '//'"
    if ".git" in parts:
        return f"{entry!r}: git's own directory is never a cache"
    return None
