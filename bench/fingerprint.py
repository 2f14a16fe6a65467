"""What the second fence costs a run: one fingerprint of the main checkout.

Builds repositories of N tracked files (default 1,000, 40,000 and 150,000), each beside an
ignored `node_modules` of M files (default 100,000, as a JavaScript project's), with a few
untracked and modified files, and times over R rounds (median):

- `fingerprint`: T25's, as every unconfined run takes it twice (core.workspace.fingerprint);
- for reference, in the same run: `git status --porcelain` alone, and a walk that lstats
  every file and directory of the tree, ignored ones included (what the fingerprint did
  before it let git's index and untracked cache do the looking).

Run:
    .venv/bin/python bench/fingerprint.py [--files 1000 40000 150000] [--ignored 100000]
        [--rounds 5]

Figures, not a test: nothing asserts on time.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import statistics
import subprocess
import tempfile
import time
from collections.abc import Awaitable, Callable
from pathlib import Path

from core.workspace.fingerprint import fingerprint

GIT = ["git", "-c", "user.name=bench", "-c", "user.email=bench@example.invalid"]


def build(where: Path, files: int, ignored: int) -> Path:
    """A repository of `files` tracked files in folders of 100, an ignored node_modules of
    `ignored` files, two untracked files and one modified."""
    repo = where / "repo"
    for i in range(files):
        place = repo / f"src/d{i // 100}/f{i}.txt"
        place.parent.mkdir(parents=True, exist_ok=True)
        place.write_text(f"{i}\n")
    for i in range(ignored):
        place = repo / f"node_modules/p{i // 100}/index{i}.js"
        place.parent.mkdir(parents=True, exist_ok=True)
        place.write_text("module.exports = 1\n")
    (repo / ".gitignore").write_text("node_modules/\n")
    subprocess.run([*GIT, "init", "-q", "-b", "trunk"], cwd=repo, check=True)
    subprocess.run([*GIT, "add", "-A"], cwd=repo, check=True)
    subprocess.run([*GIT, "commit", "-qm", "tree"], cwd=repo, check=True)
    (repo / "notes.txt").write_text("untracked\n")
    (repo / "src" / "new.txt").write_text("untracked\n")
    (repo / "src" / "d0" / "f0.txt").write_text("modified\n")
    return repo


def walk(repo: Path) -> int:
    """lstat every file and directory but .git: the walk the fingerprint used to make."""
    seen, stack = 0, [repo]
    while stack:
        for entry in os.scandir(stack.pop()):
            if entry.name == ".git":
                continue
            entry.stat(follow_symlinks=False)
            seen += 1
            if entry.is_dir(follow_symlinks=False):
                stack.append(Path(entry.path))
    return seen


async def timed(rounds: int, work: Callable[[], Awaitable[object]]) -> float:
    times = []
    for _ in range(rounds):
        start = time.perf_counter()
        await work()
        times.append((time.perf_counter() - start) * 1000)
    return statistics.median(times)


async def measure(files: int, ignored: int, rounds: int) -> tuple[float, float, float]:
    with tempfile.TemporaryDirectory() as where:
        repo = build(Path(where), files, ignored)
        await fingerprint(repo)  # the first one writes the untracked cache

        async def status() -> None:
            argv = ["git", "status", "--porcelain"]
            await asyncio.to_thread(subprocess.run, argv, cwd=repo, capture_output=True)

        return (
            await timed(rounds, lambda: fingerprint(repo)),
            await timed(rounds, status),
            await timed(rounds, lambda: asyncio.to_thread(walk, repo)),
        )


async def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--files", type=int, nargs="+", default=[1000, 40000, 150000])
    parser.add_argument("--ignored", type=int, default=100000)
    parser.add_argument("--rounds", type=int, default=5)
    args = parser.parse_args()
    print(f"ignored node_modules: {args.ignored:,} files; median of {args.rounds} rounds, ms")
    print(f"{'tracked':>9} {'fingerprint':>12} {'git status':>11} {'walk (before)':>14}")
    for files in args.files:
        fp, status, walked = await measure(files, args.ignored, args.rounds)
        print(f"{files:>9,} {fp:>12.1f} {status:>11.1f} {walked:>14.1f}")


if __name__ == "__main__":
    asyncio.run(main())
