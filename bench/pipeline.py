"""Orchestration overhead of the pipeline, with the scripted agent answering at once.

Prints, on the embedded SQLite store:
  * the orchestration overhead per stage: one task through the whole pipeline with one
    worker, its wall time (until the task was DONE) minus the time its agent processes ran
    (what T25 does in the adapter before one starts is T25's), divided by its stages; the
    median of `--repeat` such tasks, each in a fresh repository (target: <= 30 ms on a
    quiet machine; the load average is printed beside it, since a busy machine slows it),
  * the gap from one agent's exit to the next agent's spawn within a task (per stage),
  * the throughput of 100 tasks with 4 workers.

Run: .venv/bin/python bench/pipeline.py [--tasks 100] [--workers 4] [--repeat 7]
Figures, not a test: nothing here asserts on time; but it exits non-zero unless every task
ended DONE after its six agent runs (the reviewer an adapter other than the author's).
"""

from __future__ import annotations

import argparse
import asyncio
import itertools
import os
import statistics
import sys
import tempfile
import time
from collections import defaultdict
from collections.abc import Callable
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from adapters.base import CliAdapter
from adapters.checks import run_check
from adapters.scripted import ScriptedSpec
from core.config.schema import load_config
from core.control.service import ControlPlane
from core.domain.models import TaskState
from core.worker.child_watch import watch_children_by_pidfd
from core.workspace.git import git_sync
from store import open_store
from t25_tui.runtime import local_sweeper

CONFIG = """\
projects: [{name: bench, repo: .}]
roles: {spec: [{adapter: timed}], planner: [{adapter: timed}], dev: [{adapter: timed}],
        qa: [{adapter: timed}], reviewer: [{adapter: timed-reviewer}], docs: [{adapter: timed}]}
limits: {workers: %d}
"""


AGENT_RUNS = 6  # SPEC PLAN IMPLEMENTING QA REVIEW DOCS: what one task's agents run
STAGES = 7  # and PR_OPEN, which T25 runs itself
SWEEP_S = 0.5  # the sweeper's pause between passes, as `t25 run` and the cockpit have it


class TimedAdapter(CliAdapter):
    """The scripted agent, with the span of each agent process: from its start (its exit
    less the time the process ran) to the moment its exit is seen. What T25 does in the
    adapter before the process starts (the sandbox's mounts, the checkout's view, the
    private home) is T25's own time, not the agent's. The reviewer is an adapter of its own
    name: a review's author may not review it."""

    def __init__(self, name: str, spans: dict[str, list[tuple[float, float]]]) -> None:
        super().__init__(ScriptedSpec())
        self.name = name
        self.spans = spans

    async def run(self, request, sink, abort):
        result = await super().run(request, sink, abort)
        end = time.perf_counter()
        self.spans[request.task_id].append((end - result.duration_s, end))
        return result


def make_repo(path: Path, workers: int, files: int = 1) -> Path:
    """A repository of `files` tracked files (README.md, then 100 to a folder), its objects
    packed as a clone's are."""
    path.mkdir()
    git_sync("init", "-q", "-b", "trunk", cwd=path)
    git_sync("config", "user.email", "bench@t25.invalid", cwd=path)
    git_sync("config", "user.name", "bench", cwd=path)
    (path / "README.md").write_text("bench\n")
    for n in range(files - 1):
        folder = path / "src" / f"m{n // 100:04d}"
        folder.mkdir(parents=True, exist_ok=True)
        (folder / f"f{n % 100:02d}.py").write_text(f"x = {n}\n")
    git_sync("add", "-A", cwd=path)
    git_sync("commit", "-q", "-m", "init", cwd=path)
    # Packed, as a clone is: left loose, a checkout of 50,000 files reads 50,000 object files
    # (1.6 s, not 0.6) until a plain git's first commit packs them by `gc --auto` - which
    # T25's git never starts, so the bare git timed beside it would check out from a pack.
    git_sync("repack", "-a", "-d", "-q", cwd=path)
    (path / ".git" / "info" / "exclude").write_text("/.factory/\n/t25.yaml\n")
    (path / "t25.yaml").write_text(CONFIG % workers)
    return path


async def measure(
    tasks: int,
    workers: int,
    files: int = 1,
    sweep_s: float = SWEEP_S,
    made: Callable[[], object] = lambda: None,
    running: bool = False,
) -> dict:
    """`tasks` through the pipeline on `workers`, in a new repository of `files` (`made` is
    called once it is made). `running`: timed as in a factory that is running, which has
    read each CLI's version (a process of the CLI's own, ~100 ms for the scripted agent)
    before the clock starts."""
    watch_children_by_pidfd()  # as the `t25` command does
    with tempfile.TemporaryDirectory(prefix="t25-bench-") as tmp:
        repo = make_repo(Path(tmp) / "repo", workers, files)
        made()
        config = load_config(repo / "t25.yaml")
        store = await open_store(config.store_url)
        control = ControlPlane(config, store)
        await control.sync_projects()
        spans: dict[str, list[tuple[float, float]]] = defaultdict(list)
        adapters = {name: TimedAdapter(name, spans) for name in ("timed", "timed-reviewer")}
        sweeper = local_sweeper(control, adapters, run_check, workers=workers, sweep_s=sweep_s)
        if running:
            await asyncio.gather(*(adapter.version() for adapter in adapters.values()))
        for n in range(tasks):
            await control.new_task(f"task {n}", actor="bench")
        start = time.time()
        await sweeper.work()
        done = await store.list_tasks(states=[TaskState.DONE])
        # Until the last task was DONE (the store's clock is this machine's), not until the
        # sweeper's next pass found nothing left to do.
        wall = max((t.state_since.timestamp() for t in done), default=time.time()) - start
        unfinished = [t for t in await store.list_tasks() if t.state is not TaskState.DONE]
        events = await store.events_after(0, limit=10_000_000)
        await store.close()
    short = {task: len(runs) for task, runs in spans.items() if len(runs) != AGENT_RUNS}
    if unfinished or len(done) != tasks or short or len(spans) != tasks:
        for t in unfinished[:5]:
            print(f"  not done: {t.id} {t.state.value} {t.error or ''}", file=sys.stderr)
        raise SystemExit(
            f"{len(done)} of {tasks} tasks ended DONE, {len(spans)} ran agents; "
            f"tasks without {AGENT_RUNS} agent runs: {dict(list(short.items())[:5])}: "
            "the figures would not be what they say"
        )
    gaps = []
    for runs in spans.values():
        runs.sort()
        gaps += [b[0] - a[1] for a, b in itertools.pairwise(runs)]
    return {"wall": wall, "done": len(done), "gaps": gaps, "spans": spans, "events": len(events)}


def ms(values: list[float], q: float) -> str:
    if not values:
        return "-"
    ordered = sorted(values)
    return f"{ordered[min(len(ordered) - 1, int(q * len(ordered)))] * 1000:.1f} ms"


async def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--tasks", type=int, default=100)
    parser.add_argument("--workers", type=int, default=4)
    parser.add_argument("--repeat", type=int, default=7, help="one-task runs to take the median of")
    args = parser.parse_args()

    per_stage, gaps, walls, agents = [], [], [], []
    for _ in range(args.repeat):
        one = await measure(1, 1)
        spans = next(iter(one["spans"].values()))
        agent = sum(end - start for start, end in spans)
        per_stage.append((one["wall"] - agent) / STAGES)
        walls.append(one["wall"])
        agents.append(agent)
        gaps += one["gaps"]
    load = os.getloadavg()[0]
    print(f"one task, one worker (SQLite), {args.repeat} times (load average {load:.2f}):")
    print(f"  wall time            median {statistics.median(walls) * 1000:8.1f} ms")
    print(
        f"  agent time           median {statistics.median(agents) * 1000:8.1f} ms "
        f"over {AGENT_RUNS} agent runs"
    )
    print(
        f"  orchestration        median {statistics.median(per_stage) * 1000:8.1f} ms per stage "
        f"(min {min(per_stage) * 1000:.1f}, max {max(per_stage) * 1000:.1f}; "
        "target: median <= 30 ms on a quiet machine)"
    )
    print(
        f"  exit -> next spawn   median {ms(gaps, 0.5)}, max {ms(gaps, 1.0)} "
        "(includes the T25-run PR_OPEN stage between REVIEW and DOCS)"
    )

    many = await measure(args.tasks, args.workers)
    agent_runs = sum(len(s) for s in many["spans"].values())
    print(f"\n{args.tasks} tasks, {args.workers} workers (SQLite):")
    print(f"  done                 {many['done']} of {args.tasks}")
    print(f"  wall time            {many['wall']:8.2f} s")
    print(
        f"  throughput           {many['done'] / many['wall']:8.2f} tasks/s, "
        f"{agent_runs / many['wall']:.1f} agent runs/s, {many['events'] / many['wall']:.0f} events/s"
    )
    print(
        f"  exit -> next spawn   median {ms(many['gaps'], 0.5)}, p95 {ms(many['gaps'], 0.95)} "
        "(under load: includes waiting for a free worker)"
    )


if __name__ == "__main__":
    asyncio.run(main())
