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

Figures, not a test: nothing asserts on time; but it exits non-zero unless the repository
tracks the N files, the fingerprint and each `git status` saw the three changes, and each
walk met every file, the ignored ones included.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import statistics
import subprocess
import tempfile
import time
from collections.abc import Awaitable, Callable, Sequence
from pathlib import Path

from checked import happened, tracked_files

from core.workspace.fingerprint import fingerprint

CHANGES = {"notes.txt", "src/new.txt", "src/d0/f0.txt"}  # what `build` leaves changed
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


async def timed_each(
    rounds: int, steps: Sequence[tuple[str, Callable[[], Awaitable[object]]]]
) -> dict[str, float]:
    """Each named step's median time in ms, the steps timed one after the other."""
    return {name: await timed(rounds, work) for name, work in steps}


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
        first = await fingerprint(repo)  # the first one writes the untracked cache
        tracked = tracked_files(repo)
        happened(
            tracked == files + 1 and first.head_sha is not None and first.status.keys() >= CHANGES,
            f"the repository tracks {tracked} of {files} + 1 files; the fingerprint saw head "
            f"{first.head_sha} and {sorted(CHANGES & first.status.keys())} of {sorted(CHANGES)}",
        )

        async def status() -> None:
            argv = ["git", "status", "--porcelain"]
            done = await asyncio.to_thread(subprocess.run, argv, cwd=repo, capture_output=True)
            seen = done.stdout.decode()
            happened(
                done.returncode == 0 and all(path in seen for path in CHANGES),
                f"git status exited {done.returncode} and listed {seen!r}",
            )

        async def walked() -> None:
            seen = await asyncio.to_thread(walk, repo)
            happened(seen > files + ignored, f"the walk met {seen} of {files + ignored} files")

        return (
            await timed(rounds, lambda: fingerprint(repo)),
            await timed(rounds, status),
            await timed(rounds, walked),
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
