"""What a stage costs beside what git costs: T25's own time per stage on repositories of 2,
10,000 and 50,000 tracked files, with, in the same run, the git work a stage and a task
cannot do without and one `git status` of the checkout.

For each size (`--files`), tasks go through the whole pipeline with one worker and the
scripted agent answering at once (bench/pipeline.py's `measure`: it exits non-zero unless
every task ended DONE after its six agent runs), `--repeat` times:

- T25 per stage, first task: one task in a new factory, its wall time less the time its
  agent processes ran (everything T25 does in the adapter before a process starts - the
  sandbox's mounts, the checkout's view - is T25's), over its 7 stages; it pays what a
  process reads once (each CLI's version, the sandbox's probe, the repository's layout);
- T25 per stage, in a row: `--tasks` tasks one after another on one worker, the same over
  their stages, each CLI's version read before the clock starts: what a stage costs a
  factory that is running, which read them as it started (a process of each CLI: ~100 ms
  for the scripted agent, the first task's figure pays it);
- bare git stage: `git worktree add -b` + write a file + `git add -A` + `git commit`, the
  git a stage of its own would run (issue 28's yardstick on a small repository);
- bare git task: `git worktree add -b` + twice (write, `add -A`, `commit`): the git a task
  cannot do without (one checkout; the implementation's and the documentation's commits);
  "beyond git" is T25 per stage in a row less a seventh of it;
- git status: one `git status --porcelain` of the checkout (warm);
- git processes: how many git processes one task started (not the bench's own that make
  its repository), and the git commands that took the most of their time (counted on one more task, with a `git` first on PATH that counts
  and times them, so that counting costs none of the timed runs).

The bare git work is timed on a repository of the same size, packed as T25's is (as a
clone's is: pipeline.make_repo); each worktree it adds is removed after the timer stops.
Every timing starts on a quiet disk (`sync` first): on a virtual disk, the file removals of
the timing before can otherwise double a checkout's time.
Where the disk itself is the story (on some virtual disks a checkout of 50,000 files slows
from 8 to 22 s of kernel time when repeated), `--tmp /dev/shm` times T25 against git in
memory, without it.

Targets (issue 28): T25 per stage ≤ 1.5× the bare git stage on a small repository; beyond
git ≤ one git status on 50,000 files.

Run: .venv/bin/python bench/stage_cost.py [--files 2,10000,50000] [--repeat 3] [--tasks 4]
         [--tmp DIR]
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

from checked import happened, interpreter, tracked_files
from pipeline import STAGES, make_repo, measure

TIMING_GIT = """#!/bin/sh
start=$(date +%s%N)
{git} "$@"
code=$?
printf '%s %s\\n' "$(( $(date +%s%N) - start ))" "$(printf '%s ' "$@" | tr '\\n' ' ')" >> "{log}"
exit $code
"""


def own_per_stage(files: int, tasks: int = 1, *, running: bool = False) -> float:
    """T25's own time per stage, in seconds: the tasks' wall time less the time their
    agent processes ran, over their stages (`running`: the CLIs' versions read first)."""
    os.sync()  # a quiet disk: the last measurement's deleted trees are written out first
    run = asyncio.run(measure(tasks, 1, files, running=running))
    agents = sum(end - start for spans in run["spans"].values() for start, end in spans)
    return (run["wall"] - agents) / (STAGES * tasks)


def git_times(files: int, repeat: int) -> tuple[float, float, float]:
    """The median bare git stage, bare git task and `git status`, in seconds, on a
    repository of `files`."""
    stages, tasks, statuses = [], [], []
    with tempfile.TemporaryDirectory(prefix="t25-bench-git-") as tmp:
        repo = make_repo(Path(tmp) / "repo", 1, files)

        def git(*args: str, cwd: Path = repo) -> None:
            subprocess.run(["git", *args], cwd=cwd, check=True, capture_output=True)

        def commit(tree: Path, n: int) -> None:
            (tree / "change.txt").write_text(f"{n}\n")
            git("add", "-A", cwd=tree)
            git("commit", "-q", "-m", "stage", cwd=tree)

        def timed(name: str, commits: int) -> float:
            tree = Path(tmp) / name
            os.sync()
            start = time.perf_counter()
            git("worktree", "add", "-q", "-b", f"bench/{name}", str(tree), "trunk")
            for n in range(commits):
                commit(tree, n)
            took = time.perf_counter() - start
            git("worktree", "remove", "--force", str(tree))
            return took

        tracked = tracked_files(repo)
        happened(tracked == files, f"the repository tracks {tracked} of {files} files")
        git("status", "--porcelain")  # warm the index and the untracked cache
        for n in range(repeat):
            stages.append(timed(f"stage-{n}", 1))
            tasks.append(timed(f"task-{n}", 2))
            start = time.perf_counter()
            git("status", "--porcelain")
            statuses.append(time.perf_counter() - start)
    return statistics.median(stages), statistics.median(tasks), statistics.median(statuses)


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
            asyncio.run(measure(1, 1, files, made=lambda: log.write_text("")))  # the task's only
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
    parser.add_argument("--tasks", type=int, default=4, help="tasks in a row")
    parser.add_argument("--tmp", help="where the repositories go (default: the system's temp)")
    args = parser.parse_args()
    if args.tmp:
        tempfile.tempdir = args.tmp
    print(
        f"one worker (SQLite), median of {args.repeat}; {args.tasks} tasks in a row; "
        f"repositories in {tempfile.gettempdir()}; load average {os.getloadavg()[0]:.2f}"
    )
    print(interpreter())
    print(
        f"{'files':>7} {'T25/stage 1st':>14} {'in a row':>10} {'bare stage':>11} "
        f"{'bare task':>10} {'git status':>11} {'row/bare':>9} {'beyond git':>11} "
        f"{'beyond/status':>14} {'git procs':>10}"
    )
    heavy = []
    for files in [int(f) for f in args.files.split(",")]:
        first, row = [], []
        for _ in range(args.repeat):
            first.append(own_per_stage(files))
            row.append(own_per_stage(files, args.tasks, running=True))
        own, steady = statistics.median(first), statistics.median(row)
        stage, task, status = git_times(files, args.repeat)
        beyond = steady - task / STAGES
        calls = git_calls(files)
        heavy.append(f"{files:>7}: {heaviest(calls)}")
        print(
            f"{files:>7} {own * 1000:>11.1f} ms {steady * 1000:>7.1f} ms {stage * 1000:>8.1f} ms "
            f"{task * 1000:>7.1f} ms {status * 1000:>8.1f} ms {steady / stage:>8.2f}x "
            f"{beyond * 1000:>8.1f} ms {beyond / status:>13.2f}x {len(calls):>10}",
            flush=True,
        )
    print("the git commands that took the most time in one task:")
    print("\n".join(heavy))


if __name__ == "__main__":
    main()
