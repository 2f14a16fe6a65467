"""The Postgres store's connection pool: lending, waiting in line, and what is never lent again."""

from __future__ import annotations

import asyncio

import asyncpg
import pytest

from store.postgres_schema import ConnectionPool
from tests.support.backends import PostgresBackend

pytestmark = pytest.mark.postgres


@pytest.fixture
def url(pg_database: PostgresBackend) -> str:
    return pg_database.url


async def pool_on(
    url: str, *, max_size: int = 2, min_size: int = 1, **options: float
) -> ConnectionPool:
    pool = ConnectionPool(
        url, min_size=min_size, max_size=max_size, application_name="t25-pool-test", **options
    )
    await pool.start()
    return pool


async def backends(url: str) -> int:
    con = await asyncpg.connect(url)
    try:
        return await con.fetchval(
            "SELECT count(*) FROM pg_stat_activity WHERE application_name = 't25-pool-test' "
            "AND datname = current_database()"
        )  # this test's database: other runs may share the server
    finally:
        await con.close()


async def test_a_returned_connection_is_lent_again_without_opening_another(url: str) -> None:
    pool = await pool_on(url)
    try:
        first = await pool.acquire()
        pool.release(first)
        again = await pool.acquire()
        assert again is first
        pool.release(again)
        assert await backends(url) == 1
    finally:
        await pool.close()


async def test_borrowers_past_the_limit_wait_in_line(url: str) -> None:
    pool = await pool_on(url, max_size=2)
    try:
        a, b = await pool.acquire(), await pool.acquire()
        third = asyncio.create_task(pool.acquire())
        fourth = asyncio.create_task(pool.acquire())
        # not a wait: both borrowers wait; negative: load only eases it, never fails it falsely
        await asyncio.sleep(0.05)
        assert not third.done() and not fourth.done()
        pool.release(b)
        assert await asyncio.wait_for(third, 5) is b
        assert not fourth.done()
        pool.release(a)
        assert await asyncio.wait_for(fourth, 5) is a
        pool.release(a)
        pool.release(b)
        assert await backends(url) == 2
    finally:
        await pool.close()


async def test_a_cancelled_waiter_takes_no_connection_with_it(url: str) -> None:
    pool = await pool_on(url, max_size=1)
    try:
        held = await pool.acquire()
        waiting = asyncio.create_task(pool.acquire())
        # not a wait: a waiter cancelled before it queued takes nothing either (eases it)
        await asyncio.sleep(0.05)
        waiting.cancel()
        with pytest.raises(asyncio.CancelledError):
            await waiting
        pool.release(held)
        assert await asyncio.wait_for(pool.acquire(), 5) is held
        pool.release(held)
    finally:
        await pool.close()


async def test_a_statement_whose_borrower_was_cancelled_is_cancelled_before_the_next_one(
    url: str,
) -> None:
    pool = await pool_on(url, max_size=1)
    try:
        con = await pool.acquire()

        async def sleep_on_it() -> None:
            try:
                await con.execute("SELECT pg_sleep(30)")
            finally:
                pool.release(con)

        sleeping = asyncio.create_task(sleep_on_it())
        # not a wait: a query cancelled before it is sent leaves the pool usable (eases it)
        await asyncio.sleep(0.1)
        sleeping.cancel()
        with pytest.raises(asyncio.CancelledError):
            await sleeping
        again = await asyncio.wait_for(pool.acquire(), 5)
        assert again is con
        assert await asyncio.wait_for(again.fetchval("SELECT 1"), 5) == 1  # not 30 s later
        admin = await asyncpg.connect(url)
        try:
            assert (
                await admin.fetchval(
                    "SELECT count(*) FROM pg_stat_activity WHERE query LIKE '%pg_sleep(30)%' AND state = 'active' "
                    "AND pid <> pg_backend_pid()"
                )
                == 0
            )
        finally:
            await admin.close()
        pool.release(again)
    finally:
        await pool.close()


async def test_a_connection_left_in_a_transaction_is_not_lent_again(url: str) -> None:
    pool = await pool_on(url)
    try:
        con = await pool.acquire()
        await con.execute("BEGIN")
        pool.release(con)
        assert con.is_closed()
        again = await pool.acquire()
        assert again is not con and not again.is_in_transaction()
        pool.release(again)
    finally:
        await pool.close()


async def test_an_idle_connection_lost_to_the_server_is_replaced(url: str) -> None:
    pool = await pool_on(url)
    try:
        con = await pool.acquire()
        pid = con.get_server_pid()
        pool.release(con)
        admin = await asyncpg.connect(url)
        try:
            await admin.execute("SELECT pg_terminate_backend($1)", pid)
        finally:
            await admin.close()
        for _ in range(100):  # the event loop notices the closed socket
            if con.is_closed():
                break
            await asyncio.sleep(0.01)
        fresh = await pool.acquire()
        assert fresh.get_server_pid() != pid
        pool.release(fresh)
    finally:
        await pool.close()


async def test_close_waits_for_lent_connections_and_then_refuses_loans(url: str) -> None:
    pool = await pool_on(url, max_size=2)
    con = await pool.acquire()
    closing = asyncio.create_task(pool.close())
    # not a wait: the lent one holds it; negative: load only eases it, never fails it falsely
    await asyncio.sleep(0.05)
    assert not closing.done()
    with pytest.raises(asyncpg.InterfaceError, match="closing"):
        await pool.acquire()
    pool.release(con)
    await asyncio.wait_for(closing, 5)
    assert con.is_closed()
    assert await backends(url) == 0


async def test_connections_left_idle_are_closed_down_to_the_minimum(url: str) -> None:
    pool = await pool_on(url, max_size=3, min_size=1, idle_lifetime_s=0.2)
    try:
        lent = [await pool.acquire() for _ in range(3)]
        for con in lent:
            pool.release(con)
        assert await backends(url) == 3
        for _ in range(100):
            if await backends(url) == 1:
                break
            await asyncio.sleep(0.05)
        assert await backends(url) == 1
        con = await pool.acquire()  # the one kept is the most recently used, and still works
        assert con is lent[-1] and await con.fetchval("SELECT 1") == 1
        pool.release(con)
    finally:
        await pool.close()
