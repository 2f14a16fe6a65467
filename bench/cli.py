"""Start-up of the `t25` command line: how long a command takes before it can answer.

Prints the median wall time of `t25 --help`, `t25 --version`, `t25 task list`, the shell
completion's task-id lookup (`t25 __complete-ids`, run on every TAB after a command that
takes a task) and `t25 task show` on an embedded SQLite store holding 5,000 tasks, beside two floors measured
in the same run: `python3 -c pass` (the interpreter T25 runs on, with its site-packages) and
the libraries a read cannot do without, imported and used once (asyncio, aiosqlite, PyYAML,
one pydantic model validated). The median CPU time (user + system, the child's and its
children's) is printed beside the wall time: on a machine shared with other work it moves
far less. The commands run round-robin, so a machine that gets busier part-way slows each
of them alike. The store is built by this script in a throwaway directory, through the
Store API; bytecode is written and read as an installed T25 has it.

Target: `task list` and the id lookup each within twice `--help`, shown side by side.

Run: .venv/bin/python bench/cli.py [--tasks 5000] [--runs 21]
Figures, not a test: nothing here asserts on time; but it exits non-zero unless the store
holds the N tasks, every run of a command exited 0, and each command, run once before the
timing, printed what it is for (the usage, the version, the tasks, the ids, T-1's history).
"""

from __future__ import annotations

import argparse
import asyncio
import os
import resource
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from checked import happened, sqlite_count

from core.config.schema import load_config
from core.domain.events import TaskTransitioned
from core.domain.models import (
    NewRun,
    NewTask,
    Project,
    RunOutcome,
    RunStatus,
    TaskState,
    Usage,
)
from core.workspace.git import git_sync
from store import open_store

T25 = Path(sys.executable).parent / "t25"

CONFIG = """\
projects: [{name: bench, repo: .}]
"""


def make_repo(path: Path) -> Path:
    path.mkdir()
    git_sync("init", "-q", "-b", "trunk", cwd=path)
    git_sync("config", "user.email", "bench@t25.invalid", cwd=path)
    git_sync("config", "user.name", "bench", cwd=path)
    (path / "README.md").write_text("bench\n")
    git_sync("add", "-A", cwd=path)
    git_sync("commit", "-q", "-m", "init", cwd=path)
    (path / ".git" / "info" / "exclude").write_text("/.factory/\n/t25.yaml\n")
    (path / "t25.yaml").write_text(CONFIG)
    (path / ".factory").mkdir()
    return path


async def fill(repo: Path, n: int) -> None:
    """N tasks spread over every state; the first one with a finished run, so that
    `task show T-1` prints a history, a run and its cost."""
    config = load_config(repo / "t25.yaml")
    store = await open_store(config.store_url)
    try:
        await store.upsert_project(
            Project(name="bench", repo_path=str(repo), default_branch="trunk")
        )
        states = list(TaskState)
        for i in range(n):
            task, _ = await store.create_task(
                NewTask(project="bench", title=f"Task number {i}"), actor="bench"
            )
            if i == 0:
                await store.enqueue_run(NewRun(task_id=task.id, stage=TaskState.SPEC, role="spec"))
                lease = await store.claim_run("bench", 60)
                assert lease is not None
                await store.complete_run(
                    lease,
                    RunOutcome(
                        status=RunStatus.SUCCEEDED,
                        adapter="scripted",
                        model="scripted-1",
                        usage=Usage(input_tokens=1000, output_tokens=300),
                        cost_usd=0.0075,
                    ),
                )
            target = states[i % len(states)]
            if target is not TaskState.RECEIVED:
                await store.apply_transition(
                    task.id,
                    task.state,
                    TaskTransitioned(
                        task_id=task.id, from_state=task.state, to_state=target, actor="bench"
                    ),
                    {},
                )
    finally:
        await store.close()


# What a read command needs of its libraries, doing the least with each.
LIBRARY_FLOOR = """\
import asyncio, aiosqlite, yaml
from pydantic import BaseModel
class Value(BaseModel):
    n: int
Value(n=1)
"""

# As a user's shell has it: an installed T25 reads its modules' cached bytecode.
ENV = {k: v for k, v in os.environ.items() if k != "PYTHONDONTWRITEBYTECODE"}


def timed(argv: list[str], cwd: Path) -> tuple[float, float]:
    """Wall time and CPU time (user + system) of one run of `argv`."""
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    start = time.perf_counter()
    done = subprocess.run(argv, cwd=cwd, env=ENV, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    wall = time.perf_counter() - start
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    if done.returncode != 0:
        sys.exit(f"{' '.join(argv)} exited {done.returncode}: {done.stderr.decode()}")
    cpu = after.ru_utime - before.ru_utime + after.ru_stime - before.ru_stime
    return wall, cpu


# What each command prints when it did its work (its output is read once, before the timing).
ANSWERS = {
    "t25 --help": "t25 task new",
    "t25 --version": "t25 ",
    "t25 task list": "Task number",
    "t25 __complete-ids": "T-",
    "t25 task show T-1": "scripted-1",
}


def answered(name: str, argv: list[str], cwd: Path) -> None:
    """Run `argv` once; exit unless it printed what `name` is for."""
    done = subprocess.run(argv, cwd=cwd, env=ENV, capture_output=True, text=True)
    wanted = ANSWERS.get(name, "")
    happened(
        done.returncode == 0 and wanted in done.stdout,
        f"{name} exited {done.returncode} without {wanted!r} in its output: "
        f"{(done.stdout + done.stderr)[-300:]!r}",
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--tasks", type=int, default=5000)
    parser.add_argument("--runs", type=int, default=21, help="runs of each command")
    args = parser.parse_args()

    commands = {
        "python3 -c pass": [sys.executable, "-c", "pass"],
        "library floor": [sys.executable, "-c", LIBRARY_FLOOR],
        "t25 --help": [str(T25), "--help"],
        "t25 --version": [str(T25), "--version"],
        "t25 task list": [str(T25), "task", "list"],
        "t25 __complete-ids": [str(T25), "__complete-ids"],
        "t25 task show T-1": [str(T25), "task", "show", "T-1"],
    }
    with tempfile.TemporaryDirectory(prefix="t25-bench-") as tmp:
        repo = make_repo(Path(tmp) / "repo")
        start = time.monotonic()
        asyncio.run(fill(repo, args.tasks))
        held = sqlite_count(repo / ".factory" / "t25.db", "SELECT count(*) FROM tasks")
        happened(held == args.tasks, f"the store holds {held} of {args.tasks} tasks")
        print(f"seeded {args.tasks} tasks (SQLite) in {time.monotonic() - start:.1f} s")
        for name, argv in commands.items():  # warm the page cache and the bytecode once
            answered(name, argv, repo)
        walls: dict[str, list[float]] = {name: [] for name in commands}
        cpus: dict[str, list[float]] = {name: [] for name in commands}
        for _ in range(args.runs):
            for name, argv in commands.items():
                wall, cpu = timed(argv, repo)
                walls[name].append(wall)
                cpus[name].append(cpu)

    wall = {name: statistics.median(values) for name, values in walls.items()}
    cpu = {name: statistics.median(values) for name, values in cpus.items()}
    print(f"median of {args.runs} runs each:        wall       cpu")
    for name in commands:
        print(f"  {name:<26} {wall[name] * 1000:7.1f} ms {cpu[name] * 1000:7.1f} ms")
    for label, median in (("wall", wall), ("cpu", cpu)):
        help_ = median["t25 --help"]
        print(
            f"{label:>4}: task list / --help {median['t25 task list'] / help_:5.2f}, "
            f"id lookup / --help {median['t25 __complete-ids'] / help_:5.2f} (target: each "
            f"<= 2); library floor / --help {median['library floor'] / help_:.2f}"
        )


if __name__ == "__main__":
    main()
