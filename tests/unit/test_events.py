"""The in-process event bus: bounded queues, a producer never blocked."""

import asyncio
from datetime import UTC, datetime

from core.domain.events import Event, EventBus, Resync, RunOutput, TaskTransitioned, UnknownEvent
from core.domain.models import TaskState


def _output(n: int) -> RunOutput:
    return RunOutput(id=n, task_id="T-1", run_id="R-1", stream="stdout", text=f"line {n}")


async def test_subscribers_receive_published_events_in_order():
    bus = EventBus()
    a, b = bus.subscribe(), bus.subscribe()
    for n in range(1, 4):
        bus.publish(_output(n))
    assert [(await a.get()).id for _ in range(3)] == [1, 2, 3]
    assert [(await b.get()).id for _ in range(3)] == [1, 2, 3]


async def test_a_slow_subscriber_is_told_to_resync_and_never_blocks_the_producer():
    bus = EventBus()
    slow, fast = bus.subscribe(maxsize=5), bus.subscribe(maxsize=1000)
    first = await asyncio.wait_for(_publish_and_read_one(bus, slow), 1)
    assert first.id == 1
    for n in range(2, 101):  # publish never awaits: this loop cannot block
        bus.publish(_output(n))
    item = slow.get_nowait()
    assert isinstance(item, Resync) and item.last_id == 1
    assert slow.overflows > 0
    # the fast subscriber saw everything
    got = [fast.get_nowait().id for _ in range(100)]
    assert got == list(range(1, 101))


async def _publish_and_read_one(bus, sub):
    bus.publish(_output(1))
    return await sub.get()


async def test_closed_subscription_gets_nothing_more():
    bus = EventBus()
    sub = bus.subscribe()
    sub.close()
    bus.publish(_output(1))
    assert sub.get_nowait() is None


def test_events_round_trip_through_their_payload():
    at = datetime(2026, 1, 2, 3, 4, 5, tzinfo=UTC)
    ev = TaskTransitioned(
        id=7,
        at=at,
        task_id="T-1",
        from_state=TaskState.SPEC,
        to_state=TaskState.PLAN,
        actor="ana",
        reason="spec parsed",
    )
    back = Event.restore(ev.kind, ev.payload(), id=7, at=at, task_id="T-1", run_id=None)
    assert back == ev


def test_an_event_from_a_newer_t25_stays_readable():
    at = datetime(2026, 1, 2, tzinfo=UTC)
    back = Event.restore("from_the_future", {"x": 1}, id=3, at=at, task_id=None, run_id=None)
    assert isinstance(back, UnknownEvent) and back.original_kind == "from_the_future"
