"""A run read from its end, window by window, is the run read whole, line for line."""

from __future__ import annotations

import asyncio

from hypothesis import given, settings
from hypothesis import strategies as st

from core.domain.events import Event, RunFinished, RunOutput
from core.domain.models import RunStatus
from core.domain.run_tail import PAGE, read_back

# Output as agents print it: lines of varied length on two streams, cut into chunks anywhere.
chunks = st.lists(
    st.tuples(st.sampled_from(["stdout", "stderr"]), st.text("ab\n", min_size=1, max_size=40)),
    max_size=3 * PAGE,
)


def _run(parts: list[tuple[str, str]]) -> list[Event]:
    events: list[Event] = [
        RunOutput(id=n, run_id="R-1", stream=stream, text=text)
        for n, (stream, text) in enumerate(parts, start=1)
    ]
    return [*events, RunFinished(id=len(events) + 1, run_id="R-1", status=RunStatus.SUCCEEDED)]


def _reader(events: list[Event]):
    async def read(before: int | None, limit: int) -> list[Event]:
        below = [e for e in events if before is None or e.id < before]
        return below[-limit:]

    return read


def _text(events: list[Event], stream: str) -> str:
    return "".join(e.text for e in events if isinstance(e, RunOutput) and e.stream == stream)


@settings(max_examples=60, deadline=None)
@given(chunks, st.integers(min_value=1, max_value=400))
def test_the_windows_joined_with_their_held_back_heads_are_the_whole_output(
    parts: list[tuple[str, str]], want: int
) -> None:
    events = _run(parts)
    read = _reader(events)

    async def windows() -> list:
        found, before = [], None
        for _ in range(len(events) + 1):  # each window reaches further back, or is the last
            window = await read_back(read, before, want=want)
            found.append(window)
            if window.older is None:
                return found
            before = window.older
        raise AssertionError("the windows never reached the run's start")

    found = asyncio.run(windows())

    assert found[0].newest == events[-1].id
    for stream in ("stdout", "stderr"):  # oldest first: each window's held-back head, then the rest
        joined = "".join(w.heads.get(stream, "") + _text(w.events, stream) for w in reversed(found))
        assert joined == _text(events, stream)
        for w in found[:-1]:  # a window not at the start shows whole lines only
            shown = _text(w.events, stream)
            head = w.heads.get(stream, "")
            assert not shown or head.endswith("\n")


def test_a_short_run_is_one_window_with_nothing_held_back() -> None:
    events = _run([("stdout", "one\ntw"), ("stdout", "o\n")])

    window = asyncio.run(read_back(_reader(events)))

    assert window.older is None and window.heads == {} and window.events == events


def test_a_long_run_opens_on_its_last_kilobytes_in_two_reads() -> None:
    events = _run([("stdout", f"line {n:05d} " + "x" * 90 + "\n") for n in range(5 * PAGE)])
    asked: list[int] = []
    read = _reader(events)

    async def counted(before: int | None, limit: int) -> list[Event]:
        asked.append(limit)
        return await read(before, limit)

    window = asyncio.run(read_back(counted, want=64 * 1024))

    # 650 lines of 101 characters: a page of 200, then the 450 it says are missing and more
    assert len(asked) == 2 and asked[0] == PAGE and asked[1] >= 450, asked
    assert window.older is not None and window.newest == events[-1].id
    text = _text(window.events, "stdout")
    assert text.endswith(f"line {5 * PAGE - 1:05d} " + "x" * 90 + "\n")
    assert text.startswith("line ") and len(text) + 101 >= 64 * 1024
