"""What putting back a check's litter costs a QA stage (core.workspace.check_litter).

Builds a repository of N tracked files (default 1,000 and 38,491: tldr-pages' size) in a
temp dir, checks a worktree of it out, and times, over R rounds:

- the state before the checks (`tree_state`: one `git status`);
- putting back what a check left (`put_back`: one `git status`, three files removed and
  one tracked file checked out again);
- for reference, the cheapest check there is: `/bin/true` run as a subprocess, and a
  `git status` of the main checkout by the git CLI alone.

Run:
    .venv/bin/python bench/check_litter.py [--files 1000 38491] [--rounds 5]

Figures, not a test: nothing asserts on time; but it exits non-zero unless the worktree holds
the N files, each `git status` and `/bin/true` succeeded, and each put-back left the tree as
it was before the litter.
"""

from __future__ import annotations

import argparse
import asyncio
import statistics
import subprocess
import tempfile
import time
from collections.abc import Awaitable, Callable
from pathlib import Path

from checked import happened, tracked_files

from core.workspace.check_litter import put_back, tree_state


def build(where: Path, files: int) -> Path:
    """A repository of `files` small files in folders of 100, and a worktree of it."""
    repo = where / "repo"
    repo.mkdir()
    for i in range(files):
        place = repo / f"pages/d{i // 100}/p{i}.md"
        place.parent.mkdir(parents=True, exist_ok=True)
        place.write_text(f"# page {i}\n")
    (repo / ".gitignore").write_text("__pycache__/\n")
    git = ["git", "-c", "user.name=b", "-c", "user.email=b@b"]
    subprocess.run([*git, "init", "-q", "-b", "trunk"], cwd=repo, check=True)
    subprocess.run([*git, "add", "-A"], cwd=repo, check=True)
    subprocess.run([*git, "commit", "-qm", "pages"], cwd=repo, check=True)
    tree = where / "tree"
    subprocess.run([*git, "worktree", "add", "-q", "-b", "t", str(tree)], cwd=repo, check=True)
    return tree


def litter(tree: Path) -> None:
    """What a check leaves: a report, a file in a folder of its own, a rewritten page."""
    (tree / "report.txt").write_text("report\n")
    (tree / "out" / "cov").mkdir(parents=True, exist_ok=True)
    (tree / "out" / "cov" / "index.html").write_text("<html/>")
    (tree / "pages" / "d0" / "p0.md").write_text("rewritten\n")


async def timed(
    rounds: int,
    before: Callable[[], None],
    work: Callable[[], Awaitable[object]],
    after: Callable[[], Awaitable[object]] | None = None,
):
    """The median ms of `work` over `rounds`, each after `before`, then `after` (untimed)."""
    times = []
    for _ in range(rounds):
        before()
        start = time.perf_counter()
        await work()
        times.append((time.perf_counter() - start) * 1000)
        if after is not None:
            await after()
    return statistics.median(times)


async def run_true() -> None:
    done = await asyncio.create_subprocess_exec("/bin/true")
    happened(await done.wait() == 0, "/bin/true failed")


def nothing() -> None:
    return None


async def measure(files: int, rounds: int) -> tuple[float, float, float, float]:
    """The four figures, in ms, for a tree of `files` files."""
    with tempfile.TemporaryDirectory() as where:
        tree = build(Path(where), files)
        clean = await tree_state(tree)
        tracked = tracked_files(tree)
        happened(tracked == files + 1, f"the worktree tracks {tracked} files, not {files} + 1")

        async def plain_status() -> None:
            status = ["git", "status", "--porcelain"]
            done = await asyncio.to_thread(subprocess.run, status, cwd=tree, capture_output=True)
            happened(done.returncode == 0, f"git status failed: {done.stderr!r}")

        async def as_before() -> None:
            left = await tree_state(tree) - clean
            happened(not left, f"put_back left {sorted(left)[:3]} in the tree")

        return (
            await timed(rounds, nothing, lambda: tree_state(tree)),
            await timed(rounds, lambda: litter(tree), lambda: put_back(tree, clean), as_before),
            await timed(rounds, nothing, run_true),
            await timed(rounds, nothing, plain_status),
        )


async def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--files", type=int, nargs="+", default=[1000, 38491])
    parser.add_argument("--rounds", type=int, default=5)
    args = parser.parse_args()
    print(f"{'files':>8} {'state':>9} {'put back':>9} {'/bin/true':>10} {'git status':>11}  (ms)")
    for files in args.files:
        state, back, true, status = await measure(files, args.rounds)
        print(f"{files:>8} {state:>9.1f} {back:>9.1f} {true:>10.1f} {status:>11.1f}")


if __name__ == "__main__":
    asyncio.run(main())
