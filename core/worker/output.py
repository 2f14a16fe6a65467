"""An agent's output on its way to the event log: batched, and bounded per run.

Output is recorded as `RunOutput` events in batches (a short timer, or a size bound), so a
chatty agent costs the store one write per batch, not per read. A run streams at most
`limits.max_output_event_bytes` of it: past that, one truncation marker (`core.domain.output`)
is recorded and the rest is dropped here - the run's log artifact still keeps its first
`limits.max_log_bytes`, and the marker says so. The records of the run's network connections
(stream `network`, core.domain.network) are events of their own, outside that budget.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Awaitable, Callable

from core.domain.events import Event, RunOutput
from core.domain.network import NETWORK_STREAM
from core.domain.output import truncation_marker

OUTPUT_FLUSH_S = 0.05  # batch run output into events at most this often ...
OUTPUT_FLUSH_BYTES = 32_768  # ... or once this much has piled up


def _utf8_size(text: str) -> int:
    return len(text) if text.isascii() else len(text.encode("utf-8", "surrogatepass"))


def _utf8_head(text: str, size: int) -> str:
    """The longest start of `text` that is at most `size` bytes in UTF-8."""
    if text.isascii():
        return text[:size]
    return text.encode("utf-8", "surrogatepass")[:size].decode("utf-8", "ignore")


class OutputBudget:
    """What one run may still stream as events; shared by every attempt of the run (an
    overloaded provider retried, the next adapter of the chain)."""

    def __init__(self, limit: int, log_limit: int) -> None:
        self.limit = limit
        self.log_limit = log_limit
        self.used = 0
        self.spent = False  # the marker is recorded: nothing more is streamed

    def take(self, text: str) -> tuple[str, str | None]:
        """The part of `text` that may be streamed, and the marker when it ends the budget."""
        if self.spent:
            return "", None
        size = _utf8_size(text)
        if self.used + size <= self.limit:
            self.used += size
            return text, None
        head = _utf8_head(text, self.limit - self.used)
        self.used += _utf8_size(head)
        self.spent = True
        return head, truncation_marker(self.limit, self.log_limit)


class OutputStream:
    """Batches an agent's output into RunOutput events: a short timer, or a size bound;
    within the run's `OutputBudget`."""

    def __init__(
        self,
        record: Callable[[Event], Awaitable[None]],
        task_id: str,
        run_id: str,
        budget: OutputBudget,
    ) -> None:
        self.record = record
        self.task_id, self.run_id = task_id, run_id
        self.budget = budget
        self.pending: dict[str, list[str]] = {"stdout": [], "stderr": []}
        self.size = 0
        self.lock = asyncio.Lock()
        self.timer: asyncio.Task[None] | None = None

    async def write(self, stream: str, text: str) -> None:
        if stream == NETWORK_STREAM:  # T25's proxy's record of a connection: one event each,
            async with self.lock:  # outside the output budget (the proxy bounds how many)
                await self.record(self._event(stream, text))
            return
        text, marker = self.budget.take(text)
        if text:
            self.pending[stream].append(text)
            self.size += len(text)
        if marker is not None:  # ends the run's stream: the last of its output events
            await self.flush()
            async with self.lock:
                await self.record(self._event(stream, marker))
        elif self.size >= OUTPUT_FLUSH_BYTES:
            await self.flush()

    def _event(self, stream: str, text: str) -> RunOutput:
        return RunOutput(task_id=self.task_id, run_id=self.run_id, stream=stream, text=text)

    async def flush(self) -> None:
        async with self.lock:
            for stream, parts in self.pending.items():
                if parts:
                    text = "".join(parts)
                    parts.clear()
                    await self.record(self._event(stream, text))
            self.size = 0

    async def _tick(self) -> None:
        while True:
            await asyncio.sleep(OUTPUT_FLUSH_S)
            if self.size:
                await self.flush()

    async def __aenter__(self) -> OutputStream:
        self.timer = asyncio.create_task(self._tick())
        return self

    async def __aexit__(self, *exc: object) -> None:
        if self.timer:
            async with self.lock:  # never cancel the timer in the middle of a flush
                self.timer.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self.timer
        await self.flush()
