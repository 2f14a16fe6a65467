"""`t25 logs`: the agents' output of a task's runs, or of one run, as a person reads it.

`--follow` opens at the end, as `tail -f` does: the last few kilobytes of the run, or of the
task's newest runs (`core.domain.run_tail`, however long they are), then what arrives; without
it every run's output is printed from the start.

Each run's output is rendered by `adapters.transcript` (messages, tool calls with their
arguments, results, errors; the cockpit's log pane shows the same), coloured by kind on a
terminal and plain when piped. `--raw` prints what the CLI printed, as it printed it;
`--json` the same lines as JSON Lines, one `shapes.LogLine` each, with each run's start
and end.

Nothing an agent printed acts on the operator's terminal: the transcript is escaped as it is
rendered, and `--raw` and `--log` escape every control character but line feed and tab
(`core.domain.text.printable`: escape sequences, OSC clipboard writes and titles, tmux
passthrough, C1 controls) on a stream that is a terminal; piped, they stay byte-exact.
"""

from __future__ import annotations

import argparse
import asyncio
import codecs
import sys
from datetime import datetime
from typing import TextIO

from adapters.entries import Entry, Kind
from adapters.transcript import Transcript, as_text
from core.domain.events import Event, RunFinished, RunOutput, RunStarted
from core.domain.models import ArtifactKind, TaskState, parse_id, utcnow
from core.domain.network import NETWORK_STREAM
from core.domain.run_tail import TAIL_BYTES, Window, output_chars, read_back
from core.domain.states import HUMAN_NEEDED
from core.domain.text import printable
from core.errors import NotFound
from core.ports import Operations
from t25_tui.cli.context import run
from t25_tui.cli.diff import colour_wanted

# SGR colours by kind, on a terminal only.
_COLOUR = {
    Kind.MESSAGE: "",
    Kind.CALL: "\x1b[36m",
    Kind.RESULT: "\x1b[2m",
    Kind.ERROR: "\x1b[31m",
    Kind.INFO: "\x1b[2m",
    Kind.TEXT: "",
}


def coloured(entry: Entry, colour: bool) -> str:
    line = as_text(entry)
    start = _COLOUR[entry.kind] if colour else ""
    return f"{start}{line}\x1b[0m" if start else line


class Printer:
    """Where a run's output goes: the transcript of each stream of each run, raw, or as
    JSON Lines (`json`, all on `out`)."""

    def __init__(self, *, raw: bool, out: TextIO, err: TextIO, json: bool = False) -> None:
        self.raw, self.json = raw, json
        self.out, self.err = out, err
        self.colour = colour_wanted(out) and not json
        self._terminal = {"stdout": out.isatty(), "stderr": err.isatty()}  # raw: escaped
        self._transcripts: dict[tuple[str, str], Transcript] = {}

    def output(self, event: RunOutput) -> None:
        if self.raw:
            if event.stream == NETWORK_STREAM:  # T25's record, not the CLI's: not raw output
                return
            name = "stdout" if event.stream == "stdout" else "stderr"
            text = inert(event.text) if self._terminal[name] else event.text
            (self.out if name == "stdout" else self.err).write(text)
            return
        key = (event.run_id or "", event.stream)
        transcript = self._transcripts.setdefault(key, Transcript(event.stream))
        self._write(transcript.feed(event.text), event.run_id, event.stream, event.at)

    def boundary(self, event: RunStarted | RunFinished, *, alone: bool) -> None:
        """A run started or ended: a line between runs (none when `alone`, one run's
        output), and in JSON a line of its own always."""
        if self.json:
            said = event.adapter or "" if isinstance(event, RunStarted) else event.status.value
            self._line(event.run_id, event.kind, None, said, event.at)
        elif not alone:
            what = event.kind.replace("run_", "")
            self.out.write(f"\n── {printable(event.run_id or '')} {what} ──\n")

    def finish(self, run_id: str | None) -> None:
        """A run ended: its last unfinished lines, if any."""
        for stream in ("stdout", "stderr"):
            transcript = self._transcripts.pop((run_id or "", stream), None)
            if transcript is not None:
                self._write(transcript.close(), run_id, stream, utcnow())

    def close(self) -> None:
        """The output ended: every run's unfinished last lines."""
        for run_id, _stream in list(self._transcripts):
            self.finish(run_id)

    def _write(self, entries: list[Entry], run_id: str | None, stream: str, at: datetime) -> None:
        if self.json:
            for entry in entries:
                self._line(run_id, entry.kind.value, stream, entry.text, at)
            return
        out = self.err if stream == "stderr" else self.out
        colour = self.colour and out is self.out
        for entry in entries:
            out.write(coloured(entry, colour) + "\n")

    def _line(
        self, run_id: str | None, kind: str, stream: str | None, text: str, at: datetime
    ) -> None:
        from t25_tui.cli.shapes import LogLine  # only for --json (imported once, then cached)

        line = LogLine.model_validate(
            {"run_id": run_id, "kind": kind, "stream": stream, "line": text, "at": at}
        )
        self.out.write(line.model_dump_json() + "\n")


def inert(text: str) -> str:
    """Agent output as a terminal may show it: every control character but line feed and
    tab escaped (`\\x1b`), so no sequence in it reaches the terminal."""
    return printable(text, multiline=True)


def logs(args: argparse.Namespace) -> int:
    printer = Printer(raw=args.raw, out=sys.stdout, err=sys.stderr, json=args.json)

    async def body(control: Operations) -> None:
        ref = args.ref.strip()
        if args.log:
            await _stored_log(control, ref)
            return
        if ref[:1].upper() == "R":
            the_run = await control.run(ref)
            tid, only_run = the_run.task_id, the_run.id
        else:
            tid, only_run = (await control.task(ref)).id, None
        after = await _tail(control, printer, tid, only_run) if args.follow else 0
        while True:
            events = await control.events(tid, after=after, limit=5000)
            for event in events:
                after = event.id
                if not only_run or event.run_id == only_run:
                    _show(printer, event, alone=bool(only_run))
            sys.stdout.flush()
            if events:
                continue
            if not args.follow or await _finished(control, tid, only_run):
                return
            await asyncio.sleep(0.2)

    run(args, body)
    printer.close()
    return 0


def _show(printer: Printer, event: Event, *, alone: bool) -> None:
    if isinstance(event, RunOutput):
        printer.output(event)
    elif isinstance(event, RunFinished):
        printer.finish(event.run_id)
    if isinstance(event, RunStarted | RunFinished):
        printer.boundary(event, alone=alone)


async def _tail(control: Operations, printer: Printer, tid: str, only_run: str | None) -> int:
    """Where `--follow` opens: the last few kilobytes of `only_run`, or of the task's runs
    (its newest first, back until they hold TAIL_BYTES), with a line on stderr when there is
    older output; the id to follow on from."""
    if only_run:
        runs = [only_run]
    else:
        found = await control.runs(task=tid)
        runs = [r.id for r in sorted(found, key=lambda r: parse_id("R", r.id), reverse=True)]
    windows: list[Window] = []
    for run_id in runs:

        async def read(before: int | None, limit: int, run_id: str = run_id) -> list[Event]:
            return await control.run_events(run_id, before=before, limit=limit)

        held = sum(output_chars(w.events) for w in windows)
        windows.insert(0, await read_back(read, want=TAIL_BYTES - held))
        if windows[0].older is not None or held + output_chars(windows[0].events) >= TAIL_BYTES:
            break
    if windows and (windows[0].older is not None or len(windows) < len(runs)):
        printer.err.write(f"… earlier output: t25 logs {printable(only_run or tid)}\n")
    for window in windows:
        for event in window.events:
            _show(printer, event, alone=bool(only_run))
    return max((w.newest for w in windows), default=0)


async def _finished(control: Operations, tid: str, only_run: str | None) -> bool:
    if only_run:
        return (await control.run(only_run)).finished_at is not None
    task = await control.task(tid)
    return task.state in (
        TaskState.DONE,
        TaskState.CANCELLED,
        TaskState.FAILED,
        *HUMAN_NEEDED,
    )


async def _stored_log(control: Operations, ref: str) -> None:
    """A run's log artifact to stdout as it streams from the store, never held whole."""
    the_run = await control.run(ref)
    logs = [
        a
        for a in await control.artifacts(task=the_run.task_id)
        if a.meta.kind is ArtifactKind.LOG and a.meta.run_id == the_run.id
    ]
    if not logs:
        raise NotFound(
            f"{the_run.id} has no log artifact", hint="a run's log is kept once the run finished"
        )
    if not sys.stdout.isatty():  # piped: byte-exact
        async for chunk in control.artifact_chunks(logs[-1].id):
            sys.stdout.buffer.write(chunk)
        sys.stdout.flush()
        return
    # A character cut between two chunks is decoded whole; a byte that is not UTF-8 (an
    # 8-bit control among them) shows as U+FFFD.
    text = codecs.getincrementaldecoder("utf-8")(errors="replace")
    async for chunk in control.artifact_chunks(logs[-1].id):
        sys.stdout.write(inert(text.decode(chunk)))
    sys.stdout.write(inert(text.decode(b"", final=True)))
    sys.stdout.flush()
