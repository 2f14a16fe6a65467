"""What a stage costs beside what git costs: T25's own time per stage on repositories of 2,
10,000 and 50,000 tracked files, with, in the same run, the git work a stage cannot do
without and one `git status` of the checkout.

For each size (`--files`), one task goes through the whole pipeline with one worker and
the scripted agent answering at once (bench/pipeline.py's `measure`: it exits non-zero
unless the task ended DONE after its six agent runs), `--repeat` times:

- T25 per stage: the task's wall time minus the time its agents ran, over its 7 stages;
- bare git stage: `git worktree add -b` + write a file + `git add -A` + `git commit` +
  `git worktree remove`, the git a stage of its own would run, timed on the same repository;
- git status: one `git status --porcelain` of the checkout (warm);
- git processes: how many git processes the task started (counted on one more task, run
  with a `git` on PATH that counts and times them, so that counting costs none of the
  timed runs); "in git", their wall time per stage, and "outside git", T25 per stage less
  that; then, per size, the git commands that took the most of it.

Targets (issue 28): T25 per stage ≤ 1.5× the bare git stage at 2 files; ≤ one git status
at 50,000 files.

Run: .venv/bin/python bench/stage_cost.py [--files 2,10000,50000] [--repeat 3]
Figures, not a test: nothing asserts on time; but besides `measure`'s check it exits non-zero
unless the repository git timed tracks its N files and the counting `git` saw the task's
git processes.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from collections import Counter
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from checked import happened, tracked_files
from pipeline import AGENT_RUNS, STAGES, make_repo, measure

TIMING_GIT = """#!/bin/sh
start=$(date +%s%N)
{git} "$@"
code=$?
printf '%s %s\\n' "$(( $(date +%s%N) - start ))" "$(printf '%s ' "$@" | tr '\\n' ' ')" >> "{log}"
exit $code
"""


def own_per_stage(files: int) -> float:
    one = asyncio.run(measure(1, 1, files))
    spans = next(iter(one["spans"].values()))
    assert len(spans) == AGENT_RUNS  # measure exits otherwise
    return (one["wall"] - sum(end - start for start, end in spans)) / STAGES


def git_times(files: int, repeat: int) -> tuple[float, float]:
    """The median bare git stage and `git status`, in seconds, on a repository of `files`."""
    stages, statuses = [], []
    with tempfile.TemporaryDirectory(prefix="t25-bench-git-") as tmp:
        repo = make_repo(Path(tmp) / "repo", 1, files)

        def git(*args: str, cwd: Path = repo) -> None:
            subprocess.run(["git", *args], cwd=cwd, check=True, capture_output=True)

        tracked = tracked_files(repo)
        happened(tracked == files, f"the repository tracks {tracked} of {files} files")
        git("status", "--porcelain")  # warm the index and the untracked cache
        for n in range(repeat):
            tree = Path(tmp) / f"tree-{n}"
            start = time.perf_counter()
            git("worktree", "add", "-q", "-b", f"bench/{n}", str(tree), "trunk")
            (tree / "change.txt").write_text(f"{n}\n")
            git("add", "-A", cwd=tree)
            git("commit", "-q", "-m", "stage", cwd=tree)
            git("worktree", "remove", "--force", str(tree))
            stages.append(time.perf_counter() - start)
            start = time.perf_counter()
            git("status", "--porcelain")
            statuses.append(time.perf_counter() - start)
    return statistics.median(stages), statistics.median(statuses)


def git_calls(files: int) -> list[tuple[float, str]]:
    """The git processes one task starts, each with its wall time in seconds and the git
    command it ran, recorded by a `git` first on PATH."""
    real = shutil.which("git")
    with tempfile.TemporaryDirectory(prefix="t25-bench-count-") as tmp:
        log = Path(tmp) / "calls"
        log.write_text("")
        shim = Path(tmp) / "bin" / "git"
        shim.parent.mkdir()
        shim.write_text(TIMING_GIT.format(log=log, git=real))
        shim.chmod(0o755)
        path = os.environ["PATH"]
        os.environ["PATH"] = f"{shim.parent}{os.pathsep}{path}"
        try:
            asyncio.run(measure(1, 1, files))
        finally:
            os.environ["PATH"] = path
        calls = [_call(line) for line in log.read_text().splitlines()]
        happened(bool(calls), "the task started no git process through the timing git")
        return calls


def _call(line: str) -> tuple[float, str]:
    """A timing line: nanoseconds, then the arguments; the command is the first argument
    that is not an option or an option's value (`-C DIR`, `-c KEY=VALUE`)."""
    took, _, args = line.partition(" ")
    words, command = args.split(), "?"
    skip = False
    for word in words:
        if skip:
            skip = False
        elif word in ("-C", "-c"):
            skip = True
        elif not word.startswith("-"):
            command = word
            break
    return int(took) / 1e9, command


def heaviest(calls: list[tuple[float, str]], top: int = 4) -> str:
    """The git commands that took the most time in all, with how many of each."""
    total: Counter[str] = Counter()
    count: Counter[str] = Counter()
    for took, command in calls:
        total[command] += took
        count[command] += 1
    return ", ".join(
        f"{command} {count[command]}× {seconds * 1000:.0f} ms"
        for command, seconds in total.most_common(top)
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--files", default="2,10000,50000")
    parser.add_argument("--repeat", type=int, default=3)
    args = parser.parse_args()
    print(
        f"one task, one worker (SQLite), median of {args.repeat}; "
        f"load average {os.getloadavg()[0]:.2f}"
    )
    print(
        f"{'files':>7} {'T25 per stage':>14} {'bare git stage':>15} {'git status':>11} "
        f"{'T25 / bare':>11} {'T25 / status':>13} {'git processes':>14} "
        f"{'in git':>12} {'outside git':>13}"
    )
    heavy = []
    for files in [int(f) for f in args.files.split(",")]:
        own = statistics.median(own_per_stage(files) for _ in range(args.repeat))
        bare, status = git_times(files, args.repeat)
        calls = git_calls(files)
        in_git = sum(took for took, _ in calls) / STAGES
        heavy.append(f"{files:>7}: {heaviest(calls)}")
        print(
            f"{files:>7} {own * 1000:>11.1f} ms {bare * 1000:>12.1f} ms {status * 1000:>8.1f} ms "
            f"{own / bare:>10.2f}x {own / status:>12.2f}x {len(calls):>14} "
            f"{in_git * 1000:>9.1f} ms {(own - in_git) * 1000:>10.1f} ms",
            flush=True,
        )
    print("the git commands that took the most time in one task:")
    print("\n".join(heavy))


if __name__ == "__main__":
    main()
