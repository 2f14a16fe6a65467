"""How every process learns that events were written: LISTEN/NOTIFY, coalesced.

The events table is the truth; a notification only says "look again". Sending one in
every write would serialise all commits behind Postgres's global notify lock (measured
here: the whole system capped near 1,800 transitions/s whatever the worker count), so
writes never notify themselves. After a write commits, the store calls
`EventSignal.written()`, which wakes this process's readers at once and schedules one
`pg_notify` for the process: the first of a burst goes out immediately, the rest
collapse into at most one every `COALESCE_S`. Readers elsewhere LISTEN on a connection
of their own and re-read the table when woken; if that connection is lost they poll
until it is back.

`COALESCE_S` is 20 ms: a reader in another process (a cockpit, a serve) hears of a burst's
later writes at most that late, and a busy process sends at most 50 notifications a second.
At 5 ms, sixteen workers of one process claiming and completing runs as fast as Postgres let
them sent 200 a second, each a statement of its own: 8 % of their throughput (4,000 runs:
2,293 against 2,492 runs/s, the process's CPU 254 against 229 µs a run).
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import math
import weakref
from collections.abc import Awaitable, Callable

import asyncpg

from core.errors import StoreError
from store import postgres_sql as sql
from store.postgres_schema import DRIVER_FAILURES, ConnectionPool, is_connection_lost

log = logging.getLogger("t25.store.postgres")

CHANNEL = sql.EVENTS_CHANNEL
_NOT_SENT: tuple[type[BaseException], ...] = (*DRIVER_FAILURES, asyncpg.InterfaceError)
COALESCE_S = 0.02  # at most one notification per process this often
POLL_S = 0.25  # how often a reader without a listening connection looks anyway
RECHECK_S = 1.0  # ... and one with it: a notification that could not be sent is no hang


class _ProcessNotifier:
    """The one notification sender of this process (per event loop and database)."""

    def __init__(self) -> None:
        self.pools: list[ConnectionPool] = []
        self.task: asyncio.Task[None] | None = None
        self.again = False
        self.last_sent = -math.inf
        self.failing = False  # the last notification could not be sent (and that was said)

    def request(self) -> None:
        if self.task is None or self.task.done():
            self.task = asyncio.get_running_loop().create_task(self._send())
        else:
            self.again = True

    async def _send(self) -> None:
        loop = asyncio.get_running_loop()
        while True:
            delay = self.last_sent + COALESCE_S - loop.time()
            if delay > 0:
                await asyncio.sleep(delay)
            self.again = False
            self.last_sent = loop.time()
            failure = None
            # Each pool twice: a connection found lost is dropped, and the next one is fresh.
            for pool in [p for p in list(self.pools) for _ in range(2)]:
                try:
                    await pool.execute(sql.NOTIFY)
                    failure = None
                    break
                except _NOT_SENT as exc:
                    failure = exc
            if failure is not None and not self.failing:
                # a lost wake-up never fails a writer: readers re-check every RECHECK_S.
                # Said once until a notification goes out again, not once per write.
                log.warning("could not notify other T25 processes of new events: %s", failure)
            self.failing = failure is not None
            if not self.again:
                return


# One sender per event loop and database; a loop that is gone takes its senders with it.
_NOTIFIERS: weakref.WeakKeyDictionary[asyncio.AbstractEventLoop, dict[str, _ProcessNotifier]] = (
    weakref.WeakKeyDictionary()
)


class EventSignal:
    """One store's side of the wake-ups: `written()` after each committed event write,
    `wait()` for readers."""

    def __init__(
        self, url: str, pool: ConnectionPool, connect: Callable[[], Awaitable[asyncpg.Connection]]
    ) -> None:
        self._senders = _NOTIFIERS.setdefault(asyncio.get_running_loop(), {})
        self._url = url
        self._notifier = self._senders.setdefault(url, _ProcessNotifier())
        self._notifier.pools.append(pool)
        self._pool = pool
        self._connect = connect
        self._changed = asyncio.Event()
        self._listener: asyncpg.Connection | None = None
        self._listening = asyncio.Lock()
        self._deaf = False  # the last try to LISTEN failed (and said so)

    def written(self) -> None:
        """Events were committed by this store: wake local readers, tell the others soon."""
        self._wake()
        self._notifier.request()

    def _wake(self, *_: object) -> None:
        changed, self._changed = self._changed, asyncio.Event()
        changed.set()

    async def wait(
        self, after_id: int, timeout_s: float, newest: Callable[[], Awaitable[int]]
    ) -> bool:
        """True as soon as an event newer than `after_id` is visible; False after `timeout_s`."""
        loop = asyncio.get_running_loop()
        deadline = loop.time() + max(0.0, timeout_s)
        while True:
            listening = await self._listen()
            changed = self._changed  # taken before the check: a wake-up in between is not lost
            if await newest() > after_id:
                return True
            remaining = deadline - loop.time()
            if remaining <= 0:
                return False
            with contextlib.suppress(asyncio.TimeoutError):
                await asyncio.wait_for(
                    changed.wait(), min(remaining, RECHECK_S if listening else POLL_S)
                )

    async def _listen(self) -> bool:
        """Make sure this store LISTENs; False (poll instead) while that is impossible."""
        if self._listener is not None and not self._listener.is_closed():
            return True
        async with self._listening:
            if self._listener is not None and not self._listener.is_closed():
                return True
            con: asyncpg.Connection | None = None
            try:
                con = await self._connect()
                con.add_termination_listener(self._lost)
                await con.add_listener(CHANNEL, self._wake)
            except Exception as exc:
                if con is not None:
                    con.terminate()
                if not isinstance(
                    exc, StoreError | asyncpg.PostgresError
                ) and not is_connection_lost(exc):
                    raise
                if not self._deaf:  # once per loss, not once per poll while the server is away
                    log.warning("cannot LISTEN for T25 events (polling instead): %s", exc)
                self._deaf = True
                return False
            self._listener, self._deaf = con, False
            return True

    def _lost(self, con: object) -> None:
        if con is self._listener:
            self._listener = None
        self._wake()  # let waiters re-check and listen again

    async def close(self) -> None:
        notifier = self._notifier
        if notifier.task is not None and not notifier.task.done():
            with contextlib.suppress(Exception):
                await notifier.task  # the last notification of this store goes out
        notifier.pools.remove(self._pool)
        if not notifier.pools:
            self._senders.pop(self._url, None)
        if self._listener is not None:
            listener, self._listener = self._listener, None
            with contextlib.suppress(Exception):
                await listener.close(timeout=2)
