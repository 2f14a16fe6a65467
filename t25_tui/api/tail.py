"""One reader of the events table for every SSE client of a `t25 serve` process."""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator

from core.domain.backoff import Backoff
from core.domain.events import Event
from core.errors import StoreUnavailable
from core.ports import EventLog

WAIT_S = 10.0  # an idle SSE stream re-checks the events table at least this often
TAIL_QUEUE = 256  # batches a slow SSE client may fall behind before it re-reads the table
TAIL_BACKOFF = Backoff(0.5, 10.0)  # the tail retrying an unavailable store: 0.5 s doubling to 10 s

# What a stream is handed: a batch of new events, or None ("read the table again").
Batches = asyncio.Queue[list[Event] | None]


class EventTail:
    """One reader of the events table for every SSE client of this process.

    Each wake (a write by any process, see EventLog.wait_for_events) costs one query, not
    one per client. A client subscribes before its own catch-up read, so every event is
    either in that read or in a batch after it; ids already sent are skipped.

    A store outage (StoreUnavailable) ends neither the reader nor the streams: both try
    again with backoff from where they were, so once the store is back every client gets
    each event written since, in order, once.
    """

    def __init__(self, store: EventLog) -> None:
        self.store = store
        self.queues: set[Batches] = set()
        self.reader: asyncio.Task[None] | None = None
        self.closed = False
        self._closing = asyncio.Event()

    def close(self) -> None:
        """The server is stopping: every stream ends; its client resumes elsewhere by id."""
        self.closed = True
        self._closing.set()
        for queue in tuple(self.queues):
            _nudge(queue)

    @contextlib.asynccontextmanager
    async def follow(self) -> AsyncIterator[Batches]:
        queue: Batches = asyncio.Queue(maxsize=TAIL_QUEUE)
        self.queues.add(queue)
        try:
            if self.reader is None or self.reader.done():
                self.reader = asyncio.create_task(self._read(await self.store.last_event_id()))
            yield queue
        finally:
            self.queues.discard(queue)
            if not self.queues and self.reader:
                self.reader.cancel()
                self.reader = None

    async def events_after(self, cursor: int, *, limit: int) -> list[Event]:
        """A stream's own read of the table, through an outage: [] once the tail closes."""
        pauses = TAIL_BACKOFF.pauses()
        while not self.closed:
            try:
                return await self.store.events_after(cursor, limit=limit)
            except StoreUnavailable:
                with contextlib.suppress(asyncio.TimeoutError):  # a stopping server ends it now
                    await asyncio.wait_for(self._closing.wait(), next(pauses))
        return []

    async def _read(self, cursor: int) -> None:
        pauses = TAIL_BACKOFF.pauses()
        while True:
            try:
                await self.store.wait_for_events(cursor, WAIT_S)
                batch = await self.store.events_after(cursor, limit=1000)
            except StoreUnavailable:  # keep the cursor; what is written meanwhile comes later
                await asyncio.sleep(next(pauses))
                continue
            pauses = TAIL_BACKOFF.pauses()
            if not batch:
                continue
            cursor = batch[-1].id
            for queue in tuple(self.queues):
                try:
                    queue.put_nowait(batch)
                except asyncio.QueueFull:  # a slow client: it re-reads the table instead
                    _nudge(queue)


def _nudge(queue: Batches) -> None:
    """Replace what a stream has queued with None: "look at the table (and at `closed`)"."""
    while not queue.empty():
        queue.get_nowait()
    queue.put_nowait(None)
