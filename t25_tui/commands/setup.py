"""`t25 init` and `t25 demo`."""

from __future__ import annotations

import argparse
import asyncio
import os
import shlex
import subprocess
import sys
import tempfile
from pathlib import Path

from core.errors import ConfigError, T25Error
from core.git import git_sync, repo_root

FACTORY_DIR = ".factory"


def init(args: argparse.Namespace) -> int:
    from core.config import default_config_text, load_config
    from store import open_store

    root = repo_root(Path.cwd())
    if root is None:
        raise T25Error(f"{Path.cwd()} is not inside a git repository",
                       hint="run `git init` first, or cd into your repository")
    target = Path(args.config).resolve() if args.config else root / "t25.yaml"
    if target.exists():
        raise ConfigError(f"{target} already exists; T25 is already set up here",
                          hint="edit it, or remove it to start over (.factory/ is kept)")
    tmp = target.with_name(f".{target.name}.tmp")
    tmp.write_text(default_config_text())
    try:
        config = load_config(tmp)
    except T25Error:
        tmp.unlink()
        raise
    os.replace(tmp, target)
    (root / FACTORY_DIR).mkdir(exist_ok=True)
    _exclude(root, f"/{FACTORY_DIR}/")

    async def create_store() -> None:
        store = await open_store(config.store_url)
        await store.close()

    asyncio.run(create_store())
    print(f"created {target}")
    print(f"created {root / FACTORY_DIR}/ (store, audit log, worktrees; ignored by git)")
    print("next: edit t25.yaml (roles, limits, QA checks), then file a task:")
    print('  t25 task new "describe the change" --type feat')
    return 0


def _exclude(root: Path, pattern: str) -> None:
    """Add `pattern` to the repository's .git/info/exclude (shared by all worktrees)."""
    common = Path(git_sync("rev-parse", "--git-common-dir", cwd=root))
    exclude = (common if common.is_absolute() else root / common) / "info" / "exclude"
    exclude.parent.mkdir(parents=True, exist_ok=True)
    lines = exclude.read_text().splitlines() if exclude.exists() else []
    if pattern not in lines and pattern.strip("/") not in lines:
        with exclude.open("a") as fh:
            fh.write(("" if not lines or exclude.read_text().endswith("\n") else "\n")
                     + pattern + "\n")


_TOUR = [
    ("Set T25 up in the repository: t25.yaml and .factory/", ["init"]),
    ("File a few tasks; each gets a short id and a branch named after its type",
     ["task", "new", "Add rate limiting to the login endpoint", "--type", "feat",
      "--description", "At most 5 attempts per minute per IP"]),
    (None, ["task", "new", "Fix the off-by-one in pagination", "--type", "fix"]),
    (None, ["task", "new", "Explain the release process in the README", "--type", "docs"]),
    ("See the board as a list", ["task", "list"]),
    ("An operator decision: cancel a task, with a reason", ["cancel", "T-3",
                                                             "--reason", "docs sprint moved"]),
    ("Only finished, failed or cancelled tasks can be archived", ["archive", "T-1"]),
    (None, ["archive", "T-3"]),
    ("An illegal decision is refused with the reason", ["retry", "T-1"]),
    ("A task's history, runs, artifacts and cost", ["task", "show", "T-3"]),
    ("Every decision is in the hash-chained audit log", ["audit"]),
    ("…and the chain verifies against the store's anchor", ["audit", "verify"]),
]


def demo(args: argparse.Namespace) -> int:
    with tempfile.TemporaryDirectory(prefix="t25-demo-") as tmp:
        repo = Path(tmp) / "shop"
        repo.mkdir()
        _sample_repo(repo)
        print(f"A throwaway sample repository at {repo} (default branch: trunk)\n")
        env = {**os.environ, "PYTHONUNBUFFERED": "1"}
        for note, argv in _TOUR:
            if note:
                print(f"# {note}")
            print(f"$ t25 {shlex.join(argv)}", flush=True)
            cmd = [sys.executable, "-m", "t25_tui", "--actor", "demo-operator", *argv]
            subprocess.run(cmd, cwd=repo, env=env, stdin=subprocess.DEVNULL, check=False)
            print(flush=True)
        print("That was the tour. In your own repository: t25 init, then t25 task new.")
    return 0


def _sample_repo(repo: Path) -> None:
    git_sync("init", "--quiet", "--initial-branch", "trunk", cwd=repo)
    for key, value in (("user.name", "T25 Demo"), ("user.email", "demo@t25.invalid")):
        git_sync("config", key, value, cwd=repo)
    (repo / "app.py").write_text('def login(user, password):\n    return user == "admin"\n')
    (repo / "README.md").write_text("# shop\n\nA small sample service.\n")
    git_sync("add", "-A", cwd=repo)
    git_sync("commit", "--quiet", "-m", "Initial commit", cwd=repo)
