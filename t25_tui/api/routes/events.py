"""`GET /events`: every event as Server-Sent Events, resumable by id with no gap and no duplicate."""

from __future__ import annotations

import re
from collections.abc import AsyncIterator
from typing import Annotated

from fastapi import APIRouter, Header, Query
from fastapi.sse import EventSourceResponse, ServerSentEvent

from core.domain.events import Event
from core.domain.models import MAX_ID
from t25_tui.api import document
from t25_tui.api.services import Ops, SharedTail
from t25_tui.api.tail import EventTail

RETRY_MS = 3000  # an SSE client that lost its stream reconnects after this (`retry:`)
_EVENT_ID = re.compile(r"[0-9]{1,19}", re.ASCII)

router = APIRouter()


@router.get("/events", response_class=EventSourceResponse, responses=document.READ)
async def events(
    control: Ops,
    tail: SharedTail,
    after: Annotated[int, Query(ge=0, le=MAX_ID)] = 0,
    last_event_id: Annotated[str | None, Header(alias="Last-Event-ID")] = None,
) -> AsyncIterator[ServerSentEvent]:
    """Every event after `Last-Event-ID` (or `after`), then each new one as it is written.
    An id this store never gave (from another store, one that was reset, or not an id at
    all) gets a `reset` event carrying the newest id, and the stream from the start."""
    yield ServerSentEvent(comment="t25 events", retry=RETRY_MS)
    newest = await control.last_event_id()
    cursor = _cursor(after, last_event_id)
    if not 0 <= cursor <= newest:
        yield ServerSentEvent(event="reset", data={"last_id": newest})
        cursor = 0
    async for event in _following(tail, cursor):
        yield ServerSentEvent(id=str(event.id), event=event.kind, data=event.to_json())


def _cursor(after: int, last_event_id: str | None) -> int:
    """Where a stream resumes: `Last-Event-ID` when sent (-1 for one that is no id), else `after`."""
    if last_event_id is None:
        return after
    given = last_event_id.strip()
    return int(given) if _EVENT_ID.fullmatch(given) and int(given) <= MAX_ID else -1


async def _following(tail: EventTail, cursor: int) -> AsyncIterator[Event]:
    """Every event after `cursor`, once each and in order: from the events table until it
    is caught up, then from the tail, until the server stops."""
    async with tail.follow() as batches:
        while not tail.closed:
            caught_up = await tail.events_after(cursor, limit=500)
            for event in caught_up:
                yield event
                cursor = event.id
            if caught_up:
                continue
            batch = await batches.get()
            if batch is None:  # this client fell behind the tail: read the table again
                continue
            for event in batch:
                if event.id > cursor:  # the catch-up may have sent it already
                    yield event
                    cursor = event.id
