"""A run read from its end: its last few kilobytes first, older output a window at a time.

The cockpit's log pane and `t25 logs --follow` open a run where the operator looks — at its
newest output — however long the run: they read back from the run's newest event
(`Operations.run_events`, one index walk a page) until `TAIL_BYTES` of output are in hand or
the run's first event is: a first page, then as many events as that page says the rest of
the window takes, so a window is two reads whatever its events' size (each read waits its
turn on a cockpit still drawing the screen that asked for it). Scrolling up reads the window
before it the same way.

A window that does not reach the run's start may begin in the middle of a line, in each
stream: that first piece (its `heads`) is held back rather than shown cut, and joins the end
of the older window when that one is read — so the output read window by window is the
output read whole, line for line.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field

from core.domain.events import Event, RunOutput

TAIL_BYTES = 64 * 1024  # output a window holds, at least (unless the run is shorter)
PAGE = 200  # events the first read asks for
MAX_PAGE = 5000  # and the most a later one does

# A read of one run's events: its newest below id `before` (None: its newest), at most `limit`.
ReadBack = Callable[[int | None, int], Awaitable[list[Event]]]


@dataclass
class Window:
    """Some of a run's events, oldest first, with what is older than them."""

    events: list[Event]
    older: int | None  # the id older output lies below; None: the window starts the run
    newest: int = 0  # the newest id read (0: none), where a reader going on starts after
    heads: dict[str, str] = field(default_factory=dict)  # by stream: a first line held back


async def read_back(read: ReadBack, before: int | None = None, *, want: int = TAIL_BYTES) -> Window:
    """The run's newest events below `before` that hold `want` characters of output (all of
    them back to the run's first event when they hold fewer), read back a page at a time;
    their held-back heads cut off."""
    events: list[Event] = []
    held, size = 0, PAGE
    while True:
        page = await read(before, size)
        events[:0] = page
        held += output_chars(page)
        if page:
            before = page[0].id
        started = len(page) < size  # the run's first event is in hand
        if held >= want or started:
            break
        size = _rest(want - held, held / len(events))
    newest = events[-1].id if events else 0
    cut, kept = len(events), 0
    while cut > 0 and kept < want:  # the fewest newest events that hold `want`
        cut -= 1
        kept += output_chars(events[cut : cut + 1])
    if cut == 0 and started:
        return Window(events, None, newest)
    return _cut_heads(events[cut:], older=events[cut].id, newest=newest)


def _rest(missing: int, per_event: float) -> int:
    """Events to ask for next: what `missing` characters take at `per_event` each, with a
    quarter more (events vary), between PAGE and MAX_PAGE."""
    wanted = missing / max(per_event, 1.0) * 1.25
    return max(PAGE, min(MAX_PAGE, int(wanted) + 1))


def output_chars(events: list[Event]) -> int:
    """How many characters of output `events` hold."""
    return sum(len(e.text) for e in events if isinstance(e, RunOutput))


def _cut_heads(events: list[Event], *, older: int | None, newest: int) -> Window:
    """`events` with each stream's output starting at its first whole line: what comes
    before it in a stream (a line begun in older output) is held back as that stream's head."""
    heads: dict[str, str] = {}
    started: set[str] = set()
    kept: list[Event] = []
    for event in events:
        if not isinstance(event, RunOutput) or event.stream in started:
            kept.append(event)
            continue
        end = event.text.find("\n")
        heads[event.stream] = heads.get(event.stream, "") + (
            event.text if end < 0 else event.text[: end + 1]
        )
        if end < 0:
            continue
        started.add(event.stream)
        if end + 1 < len(event.text):
            kept.append(event.model_copy(update={"text": event.text[end + 1 :]}))
    return Window(kept, older, newest, heads)
