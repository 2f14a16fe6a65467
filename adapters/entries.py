"""The lines a transcript is made of (`Entry`), the words an event's parts are written in,
and `EventShapes`: how one agent CLI's JSON events read, declared by its adapter
(`CliAdapterSpec.transcript`) and used by `adapters.transcript` for every CLI the registry
holds.

Each CLI's own renderer lives in its `adapters/<cli>.py`; what they share is here: a tool
call as `Name(key=value, …)`, a tool's output as its first lines, a message, an error, each
abridged to a bound.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from enum import Enum

from adapters.parsing import JsonObject, text_of

ARGUMENT_CHARS = 80  # one argument's value, abridged
CALL_CHARS = 240  # a whole tool call line
RESULT_LINES = 6  # a tool result's first lines ...
RESULT_LINE_CHARS = 200  # ... each at most this long
MESSAGE_CHARS = 4000  # an assistant's message


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


def value_text(value: object) -> str:
    """A value as text: a string as it is, anything else as JSON."""
    return value if isinstance(value, str) else json.dumps(value, ensure_ascii=False)


def call(name: str, arguments: object) -> str:
    """A tool call as `Name(key=value, …)`, each value and the whole line abridged."""
    if isinstance(arguments, dict):
        shown = ", ".join(
            f"{k}={abridge(value_text(v), ARGUMENT_CHARS)!r}" if isinstance(v, str)
            else f"{k}={abridge(value_text(v), ARGUMENT_CHARS)}"
            for k, v in arguments.items()
        )  # fmt: skip
    else:
        shown = (
            abridge(value_text(arguments), ARGUMENT_CHARS) if arguments not in (None, "") else ""
        )
    return abridge(f"{name}({shown})", CALL_CHARS)


def output(text: str) -> str:
    """A tool's output: its first lines, each abridged, and how many more there were."""
    lines = [line for line in text.strip("\n").splitlines() if line.strip()]
    kept = [abridge(line, RESULT_LINE_CHARS) for line in lines[:RESULT_LINES]]
    more = len(lines) - len(kept)
    if more:
        kept.append(f"… {more} more line{'s' if more > 1 else ''}")
    return "\n".join(kept) if kept else "(no output)"


def content_text(content: object) -> str:
    """Text from a Claude-style content field: a string or a list of text blocks."""
    if isinstance(content, str):
        return content
    parts = (
        [text_of(b.get("text")) for b in content if isinstance(b, dict)]
        if isinstance(content, list)
        else []
    )
    return "\n".join(p for p in parts if p)


def message_entry(text: str) -> Entry:
    """What the assistant said, up to MESSAGE_CHARS."""
    text = text.strip()
    return Entry(Kind.MESSAGE, text if len(text) <= MESSAGE_CHARS else text[:MESSAGE_CHARS] + "…")


def error_entry(text: str) -> Entry:
    """An error the CLI or its provider reported, on one line."""
    return Entry(Kind.ERROR, "error: " + abridge(text, 2 * CALL_CHARS))


@dataclass(frozen=True)
class EventShapes:
    """How one CLI's JSON events read. `render` yields the entries of an event of its own
    shape and nothing for any other; `quiet` are the event types that say nothing a reader
    needs (their content arrives in other events); `known` are its types that, when `render`
    yields nothing for them, show nothing rather than an abridged unknown event."""

    render: Callable[[JsonObject], Iterator[Entry]]
    quiet: frozenset[str] = frozenset()
    known: frozenset[str] = frozenset()
