"""A run's own folders outside its worktree: the private HOME a CLI (or a check) gets, and
the scratch folder of its checkout view; both made under `run_homes()`, out of every run's
sight, and removed when the run ends."""

from __future__ import annotations

import contextlib
import os
import shutil
import tempfile
from collections.abc import Iterator, Sequence
from pathlib import Path

from adapters.checkout_view import CheckoutView, checkout_view, make_mount_points, tidy
from adapters.sandbox import Bubblewrap, Sandbox


def run_homes() -> Path:
    """Where private HOMEs are made. Not under the temp dir: Codex refuses to run its
    sandbox helpers from a home there."""
    return Path(os.environ.get("T25_RUN_HOMES") or Path.home() / ".cache" / "t25" / "homes")


def home_variables(home: Path) -> dict[str, str]:
    """HOME and the XDG folders, all inside a run's private HOME: whatever a tool caches or
    configures stays there, writable, and goes with the run."""
    return {
        "HOME": str(home),
        "XDG_CONFIG_HOME": str(home / ".config"),
        "XDG_DATA_HOME": str(home / ".local" / "share"),
        "XDG_CACHE_HOME": str(home / ".cache"),
        "XDG_STATE_HOME": str(home / ".local" / "state"),
    }


@contextlib.contextmanager
def private_home(wanted: bool, files: dict[str, str]) -> Iterator[Path | None]:
    """A fresh 0700 HOME outside the worktree for one run, seeded with the CLI's headless
    settings, removed afterwards; None when none is `wanted`."""
    if not wanted:
        yield None
        return
    where = run_homes()
    where.mkdir(parents=True, exist_ok=True, mode=0o700)
    home = Path(tempfile.mkdtemp(prefix="home-", dir=where))  # 0700
    try:
        for relative, content in files.items():
            target = home / relative
            target.parent.mkdir(parents=True, exist_ok=True)
            target.write_text(content, encoding="utf-8")
        yield home
    finally:  # T25's own throwaway HOME for this one run (never a worktree): it goes
        shutil.rmtree(home, ignore_errors=True)


@contextlib.contextmanager
def view_scratch(wanted: bool = True) -> Iterator[Path | None]:
    """A folder of the run's own for its checkout view's files (adapters.checkout_view),
    beside the private HOMEs: out of every run's sight, removed afterwards."""
    if not wanted:
        yield None
        return
    where = run_homes()
    where.mkdir(parents=True, exist_ok=True, mode=0o700)
    with tempfile.TemporaryDirectory(prefix="view-", dir=where) as aside:
        yield Path(aside)


@contextlib.contextmanager
def seen_at_checkout(
    tree: Path, sandbox: Sandbox, wanted: bool, hidden: Sequence[Path]
) -> Iterator[CheckoutView | None]:
    """The view that shows `tree` at its main checkout's path, for a run under bubblewrap
    that `wanted` it (None otherwise, or for a tree that is no linked worktree); its mount
    points are taken out of the tree afterwards."""
    with view_scratch(wanted and isinstance(sandbox, Bubblewrap)) as aside:
        view = checkout_view(tree, aside, hidden) if aside is not None else None
        if view is not None:
            make_mount_points(view, tree)
        try:
            yield view
        finally:
            if view is not None:
                tidy(view, tree)
