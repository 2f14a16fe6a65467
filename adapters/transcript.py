"""An agent's output as a person reads it: messages, tool calls, tool results, errors.

The agent CLIs print JSON events, one a line, each in its own shape; a CLI that prints plain
text (aider) is read as text. `Transcript` takes a run's output in the chunks it arrived in
(a chunk may end mid-line) and gives back `Entry` lines: what each event says, in a
sentence, with arguments and results abridged. How a CLI's events read is its adapter's to
say (`CliAdapterSpec.transcript`, `adapters.entries.EventShapes`); this module asks every
CLI in `adapters.registry`, in the registry's order, and names none. An event is recognised
by its shape, not by the adapter that ran, so a profile's name does not matter; a line that
is not a JSON object is kept as it is, and an event of no known shape is shown abridged
rather than dropped. `t25 logs` and the cockpit's log pane both read output through it.

Everything an agent wrote is escaped for a terminal here (`core.domain.text.printable`), and
read within bounds: a line is decoded through `core.domain.agent_json`, so one too long or
nested too deep is shown as the text it is; a line awaiting its end is kept in pieces, joined
once, however many chunks it comes in.
"""

from __future__ import annotations

import functools
import json
from typing import Any

from adapters import registry
from adapters.entries import CALL_CHARS, Entry, EventShapes, Kind, abridge
from adapters.parsing import JsonObject, text_of
from core.domain import agent_json
from core.domain.network import NETWORK_STREAM, Connection
from core.domain.text import printable


@functools.cache
def registered_shapes() -> tuple[EventShapes, ...]:
    """How the events of every CLI in the registry read, in its order (each CLI's adapter
    is imported the first time a transcript reads an event)."""
    return tuple(spec.transcript for spec in registry.builtin_specs() if spec.transcript)


def entries(event: JsonObject) -> list[Entry]:
    """What one JSON event says; an event of no known shape, abridged."""
    shapes = registered_shapes()
    kind = text_of(event.get("type"))
    if any(kind in shape.quiet for shape in shapes):
        return []
    for shape in shapes:
        found = list(shape.render(event))
        if found:
            return [Entry(e.kind, printable(e.text, multiline=True)) for e in found]
    if any(kind in shape.known for shape in shapes):
        return []
    return [Entry(Kind.INFO, printable(abridge(json.dumps(event, ensure_ascii=False), CALL_CHARS)))]


def render_line(line: str) -> list[Entry]:
    """One line of output: the events it holds, or the line itself as text."""
    stripped = line.strip()
    if stripped.startswith("{"):
        try:
            value: Any = agent_json.loads(stripped)
        except ValueError:  # not JSON, or beyond agent_json's bounds: text
            value = None
        if isinstance(value, dict):
            return entries(value)
    text = line.rstrip("\r\n")
    return [Entry(Kind.TEXT, printable(text, multiline=True))]


def render(text: str) -> list[Entry]:
    """A whole output at once."""
    transcript = Transcript()
    return [*transcript.feed(text), *transcript.close()]


def connection_entries(record: str) -> list[Entry]:
    """A network connection's record (core.domain.network) as a transcript shows it: a
    refused one as an error, an allowed one as information."""
    connection = Connection.from_text(record)
    if connection is None:
        return [Entry(Kind.TEXT, record)]
    return [Entry(Kind.INFO if connection.allowed else Kind.ERROR, connection.line())]


class Transcript:
    """A run's output turned into entries as it arrives: a line is rendered once it is
    whole, so a JSON event split across two chunks is read as one. The `network` stream
    holds whole records, one an event."""

    def __init__(self, stream: str = "stdout") -> None:
        self._partial: list[str] = []  # the line awaiting its end, in the chunks it came in
        self._records = stream == NETWORK_STREAM

    def feed(self, chunk: str) -> list[Entry]:
        if self._records:
            return connection_entries(chunk)
        cut = chunk.rfind("\n")
        if cut < 0:
            self._partial.append(chunk)
            return []
        text = "".join([*self._partial, chunk[:cut]])
        self._partial = [chunk[cut + 1 :]]
        out: list[Entry] = []
        for line in text.split("\n"):
            out.extend(render_line(line))
        return out

    def close(self) -> list[Entry]:
        """The last line, when the output did not end with a line break."""
        rest, self._partial = "".join(self._partial), []
        return render_line(rest) if rest.strip() else []


_PREFIX = {
    Kind.MESSAGE: "",
    Kind.CALL: "→ ",
    Kind.RESULT: "  ← ",
    Kind.ERROR: "✗ ",
    Kind.INFO: "· ",
    Kind.TEXT: "",
}


def as_text(entry: Entry) -> str:
    """An entry as a line of plain text (its continuation lines indented under it)."""
    prefix = _PREFIX[entry.kind]
    indent = " " * len(prefix)
    first, *rest = entry.text.split("\n") or [""]
    return "\n".join([prefix + first, *(indent + line for line in rest)])
