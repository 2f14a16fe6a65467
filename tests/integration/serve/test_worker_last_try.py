"""A worker that cannot reach serve keeps trying while its lease holds: the backoff's last
pause is cut short so that one try still lands before the lease lapses, and a serve back by
then hears it. The real client against a real serve, on a clock of the test's own (each
pause moves it on at once), so that nothing here depends on how fast the machine is."""

from __future__ import annotations

import asyncio
from types import SimpleNamespace

import pytest
from fastapi import Request, Response

from core.domain.backoff import Backoff
from core.domain.models import TaskState
from core.errors import LeaseLost
from t25_tui.api import worker_client
from t25_tui.api.server import make_api
from t25_tui.api.worker_client import LAST_TRY_S, HttpRunQueue
from tests.support.pipeline import Env
from tests.support.serving import CREDENTIAL, serving

LEASE_S = 5.5  # what is left of the lease when serve stops answering
PAUSE_S = 2.0  # each pause of the backoff: tries at 0, 2, 4; the next would come at 6


class Clock:
    """Seconds since the outage began; a pause passes at once."""

    def __init__(self) -> None:
        self.now = 0.0
        self.tries: list[float] = []

    def monotonic(self) -> float:
        return self.now

    async def sleep(self, seconds: float) -> None:
        self.now += seconds
        await asyncio.sleep(0)  # not a wait: lets the loop run, as a real pause would


@pytest.fixture
async def outage(shop, monkeypatch):
    """A claimed run, then serve answering 503 to its heartbeats until `back_at` (on the
    test's clock, set by the test)."""
    env = Env(shop)
    control = await env.open()
    await control.new_task("Add a greeting", actor="ana")
    await control.enter(await control.task("T-1"), TaskState.SPEC, actor="t25")
    api = make_api(control, worker_credential=CREDENTIAL, operator_token=None)
    clock, back = Clock(), {"at": float("inf")}

    @api.middleware("http")
    async def restarting(request: Request, call_next):
        if request.url.path != "/worker/heartbeat":
            return await call_next(request)
        clock.tries.append(clock.now)
        if clock.now < back["at"]:
            return Response(status_code=503)
        return await call_next(request)

    async with serving(api) as url:
        runs = HttpRunQueue(url, CREDENTIAL, retry=Backoff(PAUSE_S, PAUSE_S))
        claim = await runs.claim("w1", 30)
        assert claim is not None
        monkeypatch.setattr(worker_client, "time", SimpleNamespace(monotonic=clock.monotonic))
        monkeypatch.setattr(
            worker_client, "asyncio", SimpleNamespace(sleep=clock.sleep, gather=asyncio.gather)
        )
        runs._held(claim.lease, LEASE_S)  # extended just before serve went away
        try:
            yield runs, claim.lease, clock, back
        finally:
            await runs.close()
    await env.close()


async def test_a_serve_back_before_the_lease_lapses_hears_the_last_try(outage):
    runs, lease, clock, back = outage
    back["at"] = 4.2  # after the third try, before the lease lapses at 5.5

    extended = await runs.heartbeat(lease, 30)

    assert extended.run_id == lease.run_id
    assert clock.tries == [0.0, 2.0, 4.0, LEASE_S - LAST_TRY_S]


async def test_a_serve_away_past_the_lease_gets_no_try_after_it_lapsed(outage):
    runs, lease, clock, _ = outage

    with pytest.raises(LeaseLost, match="after 4 tries: its lease has lapsed by now"):
        await runs.heartbeat(lease, 30)

    assert clock.tries == [0.0, 2.0, 4.0, LEASE_S - LAST_TRY_S]
