"""A log opened at its end: how long until a run's newest line is on screen, for a run of 100,
10,000 and 100,000 output events, beside reading the run from its start as both used to.

For each length, on the sample factory (SQLite, the default store), T-3's running run is given
that many output events of one 80-character line each (100,000 of them is 8 MB, a run's whole
allowance, `limits.max_output_event_bytes`), then one last line. It prints:

- the cockpit: the real app (headless, in this process, its garbage collector set as `t25
  tui` sets it) opening T-3's log with `w`, from the key to the first frame that draws the
  run's newest line (the log's `render_line`, watched by the bench, gave a line holding it:
  a frame is made of those lines), median of `--repeats`; and from the key until the detail
  screen has settled (every message its widgets had queued handled: its footer made, its
  other tabs laid out), which the operator does not wait for to read the line; then the
  pane alone, its screen open: from the pane told to open the run afresh to the newest line
  drawn; beside it, in the same run, the reading a pane made before it opened a run at its
  end — every event of the task, in pages of 5,000, the run's output rendered through the
  transcript — which it did before drawing a line (a lower bound of that way: the drawing,
  a thousand lines a tick, came after);
- the command line: the real `t25 logs R-… --follow` on the run once it finished (its last
  64 KB, then it exits) beside `t25 logs R-…` (every line), median wall time.

Checked: the pane's last line is the run's newest and it holds a window, not the run; the
old way's read rendered every line; `--follow` printed the newest line and not the first;
`t25 logs` printed every line.

Target: the newest line within 0.3 s whatever the run's length.

Run:  .venv/bin/python bench/log_open.py [--events 100,10000,100000] [--repeats 5]
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import sqlite3
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from checked import happened
from cli import ENV, timed
from tui import load

from core.domain.events import RunFinished, RunOutput
from core.domain.models import RunStatus
from tests.support.terminal import T25

NEWEST = "agent: the newest line, the one the operator opened the log for"


def _line(n: int) -> str:
    return f"agent: line {n:07d} " + "w" * 59  # 80 characters and its newline


def _copy(db: Path, run_number: int, events: int) -> None:
    """`events` output events of the run, one line each, copied in SQL from the last one."""
    with sqlite3.connect(db) as con:
        (template,) = con.execute(
            "SELECT max(id) FROM events WHERE run_id = ? AND kind = 'run_output'", (run_number,)
        ).fetchone()
        con.execute(
            "WITH RECURSIVE n(i) AS (SELECT 1 UNION ALL SELECT i + 1 FROM n WHERE i < ?)"
            " INSERT INTO events (at, kind, task_id, run_id, payload)"
            " SELECT e.at, e.kind, e.task_id, e.run_id, json_set(e.payload, '$.text',"
            " printf('agent: line %07d %s' || char(10), i, replace(printf('%059d', 0), '0', 'w')))"
            " FROM events AS e, n WHERE e.id = ? ORDER BY i",
            (events, template),
        )


async def _old_read(control, task_id: str, run_id: str) -> tuple[float, int]:
    """What a pane read before drawing a line, before it opened runs at their end."""
    from adapters.transcript import Transcript

    started = time.monotonic()
    after, lines = 0, 0
    transcript = Transcript("stdout")
    while True:
        events = await control.events(task_id, after=after, limit=5000)
        for e in events:
            after = e.id
            if isinstance(e, RunOutput) and e.run_id == run_id:
                lines += len(transcript.feed(e.text))
        if len(events) < 5000:
            break
    return time.monotonic() - started, lines


@contextlib.contextmanager
def drawn(at: list[float]) -> Iterator[None]:
    """While open, each time a log draws a line that holds the newest line, the time, into
    `at`: what the terminal shows is made of the lines `render_line` gives."""
    from textual.strip import Strip
    from textual.widgets import Log

    original = Log.render_line

    def render_line(self: Log, y: int) -> Strip:
        strip = original(self, y)
        if NEWEST in strip.text:
            at.append(time.monotonic())
        return strip

    Log.render_line = render_line  # type: ignore[method-assign]
    try:
        yield
    finally:
        Log.render_line = original  # type: ignore[method-assign]


async def cockpit(
    events: int, repeats: int, where: Path
) -> tuple[list[float], list[float], list[float], float, str]:
    from t25_tui.runtime import open_sample
    from t25_tui.tui.app import calm_garbage_collector, make_app
    from t25_tui.tui.screens.detail import TaskDetailScreen
    from t25_tui.tui.widgets.logpane import LogPane

    s = await open_sample(where / "shop")
    f = s.control
    run = [r for r in await f.store.list_runs(task_id="T-3") if r.status is RunStatus.RUNNING][-1]
    await f.record(RunOutput(task_id="T-3", run_id=run.id, stream="stdout", text="x\n"))
    _copy(where / "shop" / ".factory" / "t25.db", int(run.id[2:]), events)
    await f.record(RunOutput(task_id="T-3", run_id=run.id, stream="stdout", text=NEWEST + "\n"))
    took: list[float] = []
    settled: list[float] = []
    alone: list[float] = []
    app = make_app(f, clock=s.clock)
    calm_garbage_collector()  # as `t25 tui` runs its app (a collection is no frame's cost)
    at: list[float] = []  # when the newest line was drawn

    async def newest_drawn(started: float) -> float:
        """How long after `started` a frame first drew the newest line (bounded: 120 s);
        `at` is emptied before the clock starts."""
        while not at:
            happened(time.monotonic() - started < 120, "the newest line not drawn in 120 s")
            await asyncio.sleep(0.002)  # not a wait: polling the draw, bounded above
        return at[0] - started

    def newest_last() -> LogPane:
        """The pane, whose last line must be the run's newest."""
        happened(isinstance(app.screen, TaskDetailScreen), "the key opened no task detail")
        pane = app.screen.query_one(LogPane)
        shown = [line for line in pane.output.lines if line]
        happened(bool(shown) and shown[-1] == NEWEST, f"the pane's last line: {shown[-1:]}")
        return pane

    async with app.run_test(size=(120, 36)) as pilot:
        await app.loaded.wait()
        with drawn(at):
            for _ in range(repeats):
                app.board.focus_task("T-3")
                at.clear()
                started = time.monotonic()
                await pilot.press("w")  # its log (on the board, l moves between lanes)
                took.append(await newest_drawn(started))
                await pilot.pause()  # the screen settles: every message it had queued handled
                settled.append(time.monotonic() - started)
                pane = newest_last()
                held = len(pane.output.lines)
                happened(held < events or events <= 1000, f"the pane read the whole run ({held})")
                at.clear()
                started = time.monotonic()
                pane.show_run(run.id, chosen=True)  # the pane alone: its screen is open already
                happened(not pane.output.lines, "the pane was not cleared to open the run again")
                alone.append(await newest_drawn(started))
                await pilot.pause()
                newest_last()
                app.pop_screen()
                await pilot.pause()
    # After the cockpit: what the old read leaves to collect is not the cockpit's to carry.
    old, rendered = await _old_read(f, "T-3", run.id)
    happened(rendered >= events + 1, f"the old read rendered {rendered} of {events + 1} lines")
    await f.record(RunFinished(task_id="T-3", run_id=run.id, status=RunStatus.SUCCEEDED))
    await f.store.cancel_runs("T-3")
    await s.close()
    return took, settled, alone, old, run.id


def command_line(repo: Path, run_id: str, events: int, repeats: int) -> tuple[float, float]:
    follow = [str(T25), "logs", run_id, "--follow"]
    whole = [str(T25), "logs", run_id]
    tail = subprocess.run(follow, cwd=repo, env=ENV, capture_output=True, text=True)
    printed = tail.stdout.splitlines()
    happened(NEWEST in printed, f"--follow did not print the newest line: {tail.stderr[-300:]}")
    happened(_line(1) not in printed or events < 1000, "--follow printed the run from its start")
    every = subprocess.run(whole, cwd=repo, env=ENV, capture_output=True, text=True)
    count = sum(1 for line in every.stdout.splitlines() if line.startswith("agent: line "))
    happened(count == events, f"t25 logs printed {count} of {events} lines")
    walls: dict[str, list[float]] = {"follow": [], "whole": []}
    for _ in range(repeats):  # round-robin: a busier machine slows each alike
        walls["follow"].append(timed(follow, repo)[0])
        walls["whole"].append(timed(whole, repo)[0])
    return statistics.median(walls["follow"]), statistics.median(walls["whole"])


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--events", default="100,10000,100000")
    parser.add_argument("--repeats", type=int, default=5)
    args = parser.parse_args()
    print(f"a run's newest line, opened at its end; {load()}")
    rows = []
    for events in [int(n) for n in args.events.split(",")]:
        with tempfile.TemporaryDirectory(prefix="t25-bench-log-") as tmp:
            took, settled, alone, old, run_id = asyncio.run(
                cockpit(events, args.repeats, Path(tmp))
            )
            follow, whole = command_line(Path(tmp) / "shop", run_id, events, args.repeats)
        pane = statistics.median(alone)
        rows.append((events, statistics.median(took), max(took), pane, old, follow, whole))
        print(
            f"\n{events:,} output events; {load()}\n"
            f"  cockpit: newest line drawn after median {statistics.median(took) * 1000:.0f} ms, "
            f"worst {max(took) * 1000:.0f} ms of {args.repeats} (target ≤ 300 ms) · before: "
            f"≥ {old * 1000:.0f} ms reading every event, then drawing\n"
            f"  the detail screen settled after median {statistics.median(settled) * 1000:.0f} "
            f"ms, worst {max(settled) * 1000:.0f} ms\n"
            f"  the log pane alone (its screen open): newest line drawn after median "
            f"{pane * 1000:.0f} ms, worst {max(alone) * 1000:.0f} ms\n"
            f"  t25 logs --follow {follow * 1000:.0f} ms · t25 logs (every line) "
            f"{whole * 1000:.0f} ms"
        )
    print("\nevents      cockpit now (worst) · pane alone / before ≥      logs --follow / whole")
    for events, median, worst, pane, old, follow, whole in rows:
        print(
            f"{events:>8,}   {median * 1000:6.0f} ({worst * 1000:.0f}) · {pane * 1000:4.0f} / "
            f"{old * 1000:8.0f} ms"
            f"      {follow * 1000:6.0f} / {whole * 1000:6.0f} ms"
        )


if __name__ == "__main__":
    main()
