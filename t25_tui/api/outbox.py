"""A remote worker's output on its way to `t25 serve`: in order, batched, retried, bounded.

A run's events (RunStarted, RunOutput) are put in its lease's outbox and the agent goes on
at once (its start waits for its RunStarted to be sent: HttpRunQueue.record); one sender per lease posts them to `/worker/events` in the order they were put,
several to a request, each request retried under one idempotency key until serve answers
or the lease would have lapsed. So output survives a serve restart, a Postgres restart or
a network cut shorter than the lease, and nothing is kept twice: each event carries its
number in the outbox (`seq`), and the store keeps an event of a lease's number once, so a
batch a serve kept before it died unanswered is not kept again by the one its retry reaches.

The outbox is bounded (`LIMIT_CHARS` of output text waiting). Past it, further output is
dropped, counted, and replaced by one line on stderr saying how much was lost once serve
takes the outbox's events again; events that are not output are always kept. The agent
is never slowed down by serve being away, and its result (the final answer, the report)
does not travel in the outbox: it goes with the completion.
"""

from __future__ import annotations

import asyncio
import logging
from collections import deque
from collections.abc import Awaitable, Callable
from typing import Any

from core.errors import LeaseLost, T25Error

log = logging.getLogger("t25.remote")

LIMIT_CHARS = 8_000_000  # output text waiting for serve, at most
BATCH_EVENTS = 64  # events in one request, at most ...
BATCH_CHARS = 256_000  # ... and about this much output text

Send = Callable[[list[dict[str, Any]]], Awaitable[None]]


class Outbox:
    """One lease's events waiting for serve, and the sender that posts them in order."""

    def __init__(self, run_id: str, send: Send, *, limit_chars: int = LIMIT_CHARS) -> None:
        self.run_id = run_id
        self.send = send
        self.limit_chars = limit_chars
        self.waiting: deque[dict[str, Any]] = deque()
        self.chars = 0
        self.dropped = 0  # output characters dropped past the bound, not yet said
        self.lost = False  # the lease is gone: nothing more is sent
        self.sender: asyncio.Task[None] | None = None
        self.numbered = 0  # events put so far: each carries its number (`seq`)

    def put(self, raw: dict[str, Any]) -> None:
        if self.lost:
            return
        text = raw.get("text") if raw.get("kind") == "run_output" else None
        if isinstance(text, str):
            if self.chars + len(text) > self.limit_chars:
                self.dropped += len(text)
                return
            self.chars += len(text)
        self.numbered += 1
        self.waiting.append({**raw, "seq": self.numbered})
        if self.sender is None or self.sender.done():
            self.sender = asyncio.create_task(self._send_all())

    async def drain(self) -> None:
        """Wait until everything put so far was sent (or the lease was found gone)."""
        while self.sender is not None and not self.sender.done():
            await asyncio.shield(self.sender)

    def close(self) -> None:
        if self.sender is not None:
            self.sender.cancel()

    async def _send_all(self) -> None:
        while self.waiting and not self.lost:
            batch = self._batch()
            try:
                await self.send(batch)
            except LeaseLost as exc:
                log.info("output of %s is not sent: %s", self.run_id, exc)
                self.lost = True
                self.waiting.clear()
                return
            except T25Error as exc:  # refused for good (not transient): not the agent's fault
                log.warning("%d event(s) of %s refused by serve: %s", len(batch), self.run_id, exc)
            for _ in batch:
                sent = self.waiting.popleft()
                text = sent.get("text") if sent.get("kind") == "run_output" else None
                if isinstance(text, str):
                    self.chars -= len(text)
            if self.dropped and not self.waiting:
                self._say_dropped()

    def _batch(self) -> list[dict[str, Any]]:
        batch: list[dict[str, Any]] = []
        chars = 0
        for raw in self.waiting:
            text = raw.get("text")
            size = len(text) if isinstance(text, str) else 0
            if batch and (len(batch) >= BATCH_EVENTS or chars + size > BATCH_CHARS):
                break
            batch.append(raw)
            chars += size
        return batch

    def _say_dropped(self) -> None:
        note = (
            f"[t25: {self.dropped} characters of output were dropped while serve was unreachable]\n"
        )
        self.dropped = 0
        self.waiting.append({"kind": "run_output", "stream": "stderr", "text": note})
