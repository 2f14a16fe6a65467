"""An agent's output as a person reads it: messages, tool calls, tool results, errors.

The agent CLIs print JSON events, one a line, each in its own shape: Claude Code's
stream-json (and the scripted agent's, which copies it), Codex's `exec --json`, Gemini
CLI's stream-json and opencode's `run --format json`; aider prints plain text. `Transcript`
takes a run's output in the chunks it arrived in (a chunk may end mid-line) and gives back
`Entry` lines: what each event says, in a sentence, with arguments and results abridged.
An event is recognised by its shape, not by the adapter that ran, so a profile's name
does not matter; a line that is not a JSON object is kept as it is, and an event of no
known shape is shown abridged rather than dropped. `t25 logs` and the cockpit's log pane
both read output through it.

Everything an agent wrote is escaped for a terminal here (`core.domain.text.printable`), and
read within bounds: a line is decoded through `core.domain.agent_json`, so one too long or
nested too deep is shown as the text it is; a line awaiting its end is kept in pieces, joined
once, however many chunks it comes in.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from dataclasses import dataclass
from enum import Enum
from typing import Any

from adapters.parsing import JsonObject, list_at, object_at, text_of
from core.domain import agent_json
from core.domain.network import NETWORK_STREAM, Connection
from core.domain.text import printable

ARGUMENT_CHARS = 80  # one argument's value, abridged
CALL_CHARS = 240  # a whole tool call line
RESULT_LINES = 6  # a tool result's first lines ...
RESULT_LINE_CHARS = 200  # ... each at most this long
MESSAGE_CHARS = 4000  # an assistant's message
# Events that say nothing a reader needs (their content arrives in other events).
_QUIET = frozenset(
    {"turn.started", "step_start", "step_finish", "stream_event", "item.updated", "rate_limit"}
)


class Kind(Enum):
    """What a line of a transcript is; a face styles it by this."""

    MESSAGE = "message"  # the assistant speaking
    CALL = "call"  # a tool call, with its arguments
    RESULT = "result"  # what a tool gave back
    ERROR = "error"  # an error the CLI or the provider reported
    INFO = "info"  # session start, the final result, usage
    TEXT = "text"  # a line that was not an event: kept as printed


@dataclass(frozen=True)
class Entry:
    """One line of a transcript (it may hold line breaks: a message of several lines)."""

    kind: Kind
    text: str


def abridge(text: str, limit: int) -> str:
    """`text` on one line, at most `limit` characters (… marks a cut)."""
    flat = " ".join(text.split())
    return flat if len(flat) <= limit else flat[: limit - 1] + "…"


def _value(value: object) -> str:
    return value if isinstance(value, str) else json.dumps(value, ensure_ascii=False)


def call(name: str, arguments: object) -> str:
    """A tool call as `Name(key=value, …)`, each value and the whole line abridged."""
    if isinstance(arguments, dict):
        shown = ", ".join(
            f"{k}={abridge(_value(v), ARGUMENT_CHARS)!r}" if isinstance(v, str)
            else f"{k}={abridge(_value(v), ARGUMENT_CHARS)}"
            for k, v in arguments.items()
        )  # fmt: skip
    else:
        shown = abridge(_value(arguments), ARGUMENT_CHARS) if arguments not in (None, "") else ""
    return abridge(f"{name}({shown})", CALL_CHARS)


def result(text: str) -> str:
    """A tool's output: its first lines, each abridged, and how many more there were."""
    lines = [line for line in text.strip("\n").splitlines() if line.strip()]
    kept = [abridge(line, RESULT_LINE_CHARS) for line in lines[:RESULT_LINES]]
    more = len(lines) - len(kept)
    if more:
        kept.append(f"… {more} more line{'s' if more > 1 else ''}")
    return "\n".join(kept) if kept else "(no output)"


def _content_text(content: object) -> str:
    """Text from a Claude-style content field: a string or a list of text blocks."""
    if isinstance(content, str):
        return content
    parts = (
        [text_of(b.get("text")) for b in content if isinstance(b, dict)]
        if isinstance(content, list)
        else []
    )
    return "\n".join(p for p in parts if p)


def _message(text: str) -> Entry:
    text = text.strip()
    return Entry(Kind.MESSAGE, text if len(text) <= MESSAGE_CHARS else text[:MESSAGE_CHARS] + "…")


def _error(text: str) -> Entry:
    return Entry(Kind.ERROR, "error: " + abridge(text, 2 * CALL_CHARS))


# -- one renderer per CLI's shapes; each yields nothing for an event not its own ------------


def _claude(e: JsonObject) -> Iterator[Entry]:
    kind = e.get("type")
    if kind == "system" and e.get("subtype") == "init":
        model = text_of(e.get("model")) or "?"
        yield Entry(
            Kind.INFO, f"session started · model {model} · {len(list_at(e, 'tools'))} tools"
        )
    elif kind == "system":
        rest = {k: v for k, v in e.items() if k not in ("type", "subtype", "session_id", "uuid")}
        yield Entry(
            Kind.INFO, abridge(f"{e.get('subtype') or 'system'} {_value(rest)}", CALL_CHARS)
        )
    elif kind == "assistant":
        if "text" in e and "message" not in e:  # the scripted agent's
            yield _message(text_of(e.get("text")))
            return
        for block in list_at(object_at(e, "message"), "content"):
            if not isinstance(block, dict):
                continue
            if block.get("type") == "text":
                yield _message(text_of(block.get("text")))
            elif block.get("type") == "thinking":
                yield Entry(Kind.INFO, "thinking: " + abridge(text_of(block.get("thinking")), 200))
            elif block.get("type") == "tool_use":
                yield Entry(Kind.CALL, call(text_of(block.get("name")), block.get("input")))
    elif kind == "user":
        for block in list_at(object_at(e, "message"), "content"):
            if isinstance(block, dict) and block.get("type") == "tool_result":
                text = result(_content_text(block.get("content")))
                if block.get("is_error"):
                    yield _error(text)
                else:
                    yield Entry(Kind.RESULT, text)
    elif kind == "result" and ("subtype" in e or "num_turns" in e):
        yield from _claude_result(e)


def _claude_result(e: JsonObject) -> Iterator[Entry]:
    what = "error" if e.get("is_error") else text_of(e.get("subtype")) or "done"
    turns = e.get("num_turns")
    cost = e.get("total_cost_usd")
    facts = [what]
    if isinstance(turns, int):
        facts.append(f"{turns} turn{'s' if turns != 1 else ''}")
    if isinstance(cost, int | float) and not isinstance(cost, bool):
        facts.append(f"${cost:.4f}")
    if e.get("is_error"):
        yield _error(text_of(e.get("result")) or what)
    yield Entry(Kind.INFO, "finished: " + " · ".join(facts))


def _scripted_tool(e: JsonObject) -> Iterator[Entry]:
    if e.get("type") == "tool_use" and "name" in e and "tool_name" not in e:
        args = {k: v for k, v in e.items() if k not in ("type", "name")}
        yield Entry(Kind.CALL, call(text_of(e.get("name")), args))


def _codex(e: JsonObject) -> Iterator[Entry]:
    kind = text_of(e.get("type"))
    if kind == "thread.started":
        yield Entry(Kind.INFO, "session started")
    elif kind == "turn.completed":
        usage = object_at(e, "usage")
        yield Entry(
            Kind.INFO,
            f"turn finished · tokens in {usage.get('input_tokens', 0)} "
            f"out {usage.get('output_tokens', 0)}",
        )
    elif kind == "turn.failed":
        yield _error(text_of(object_at(e, "error").get("message")) or "the turn failed")
    elif kind == "error" and "message" in e:
        yield _error(text_of(e.get("message")))
    elif kind in ("item.started", "item.completed"):
        yield from _codex_item(object_at(e, "item"), done=kind == "item.completed")


def _codex_item(item: JsonObject, *, done: bool) -> Iterator[Entry]:
    kind = item.get("type")
    if kind == "command_execution":
        if not done:
            yield Entry(Kind.CALL, call("shell", {"command": item.get("command")}))
        else:
            code = item.get("exit_code")
            output = result(text_of(item.get("aggregated_output")))
            yield Entry(Kind.RESULT if code in (0, None) else Kind.ERROR, f"exit {code}: {output}")
    elif kind == "file_change" and done:
        changes = [
            f"{c.get('kind', '?')} {c.get('path', '?')}"
            for c in list_at(item, "changes")
            if isinstance(c, dict)
        ]
        yield Entry(Kind.CALL, call("edit", ", ".join(changes)))
    elif kind == "mcp_tool_call" and not done:
        name = f"{text_of(item.get('server'))}.{text_of(item.get('tool'))}"
        yield Entry(Kind.CALL, call(name, item.get("arguments")))
    elif kind == "mcp_tool_call" and done:
        yield Entry(Kind.RESULT, result(_value(item.get("result") or item.get("error") or "")))
    elif kind == "web_search" and not done:
        yield Entry(Kind.CALL, call("web_search", {"query": item.get("query")}))
    elif kind == "agent_message" and done:
        yield _message(text_of(item.get("text")))
    elif kind == "reasoning" and done:
        yield Entry(Kind.INFO, "thinking: " + abridge(text_of(item.get("text")), 200))
    elif kind == "error":
        yield _error(text_of(item.get("message")))


def _gemini(e: JsonObject) -> Iterator[Entry]:
    kind = e.get("type")
    if kind == "init":
        yield Entry(Kind.INFO, f"session started · model {text_of(e.get('model')) or '?'}")
    elif kind == "message":
        text = _content_text(e.get("content"))
        if e.get("role") == "assistant":
            yield _message(text)
        else:
            yield Entry(Kind.INFO, f"{text_of(e.get('role')) or 'user'}: " + abridge(text, 200))
    elif kind == "tool_use" and "tool_name" in e:
        yield Entry(Kind.CALL, call(text_of(e.get("tool_name")), e.get("parameters")))
    elif kind == "tool_result" and "tool_id" in e:
        status = text_of(e.get("status")) or "done"
        error = e.get("error")
        if error or status == "error":
            yield _error(text_of(object_at(e, "error").get("message")) or _value(error) or status)
        else:
            output = text_of(e.get("output"))
            yield Entry(Kind.RESULT, result(output) if output else status)
    elif kind == "result" and "stats" in e:
        stats = object_at(e, "stats")
        if e.get("status") == "error":
            yield _error(text_of(object_at(e, "error").get("message")) or "the run failed")
        yield Entry(
            Kind.INFO,
            f"finished: {text_of(e.get('status')) or 'done'} · tokens in "
            f"{stats.get('input_tokens', 0)} out {stats.get('output_tokens', 0)}",
        )
    elif kind == "error" and "message" in e and "sessionID" not in e:
        yield _error(text_of(e.get("message")))


def _opencode(e: JsonObject) -> Iterator[Entry]:
    kind = e.get("type")
    part = object_at(e, "part")
    if kind == "text" and part:
        yield _message(text_of(part.get("text")))
    elif kind == "tool_use" and part:
        state = object_at(part, "state")
        yield Entry(Kind.CALL, call(text_of(part.get("tool")), state.get("input")))
        if state.get("status") == "error":
            yield _error(text_of(state.get("error")) or "the tool failed")
        elif "output" in state:
            yield Entry(Kind.RESULT, result(text_of(state.get("output"))))
    elif kind == "error" and "sessionID" in e:
        error = object_at(e, "error")
        message = text_of(object_at(error, "data").get("message")) or text_of(error.get("message"))
        name = text_of(error.get("name"))
        yield _error(f"{name}: {message}" if name and message else message or name or "error")


_RENDERERS = (_claude, _scripted_tool, _codex, _gemini, _opencode)


def entries(event: JsonObject) -> list[Entry]:
    """What one JSON event says; an event of no known shape, abridged."""
    if text_of(event.get("type")) in _QUIET:
        return []
    for render in _RENDERERS:
        found = list(render(event))
        if found:
            return [Entry(e.kind, printable(e.text, multiline=True)) for e in found]
    if _known(event):
        return []
    return [Entry(Kind.INFO, printable(abridge(json.dumps(event, ensure_ascii=False), CALL_CHARS)))]


def _known(event: JsonObject) -> bool:
    """An event one of the shapes has but that says nothing worth a line (a Codex item
    started that shows only when completed, a Gemini delta with no text, ...)."""
    kind = text_of(event.get("type"))
    return kind in {
        "assistant", "user", "system", "result", "item.started", "item.completed", "message",
        "tool_use", "tool_result", "text", "init",
    }  # fmt: skip


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
