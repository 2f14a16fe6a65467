"""Errors cross the wire with their class: every T25 error has a stable code and a status,
`t25 serve` answers `{error, hint, code}`, and its clients raise what it raised.

Each class is raised for real inside a real serve (a route this test mounts on the app
`make_api` builds, behind its admission check and its handlers), and read back by the real HTTP
client the remote worker and the remote cockpit use.
"""

from __future__ import annotations

import inspect

import httpx
import pytest
from fastapi import Request

import core.errors
from core.domain.decisions import Decision
from core.domain.models import TaskState
from core.domain.verbs import Verb
from core.errors import LeaseLost, NotFound, PolicyRefused, StaleState, T25Error
from t25_tui.api import errors as wire
from t25_tui.api.cockpit_client import attach
from t25_tui.api.credentials import local_token
from t25_tui.api.server import make_api
from t25_tui.api.worker_client import Http, HttpRunQueue
from tests.support.pipeline import Env
from tests.support.serving import CREDENTIAL, WORKER, serving

# what the OpenAPI document says a route may answer (426: a worker route, to another protocol)
DOCUMENTED = {400, 404, 409, 422, 426, 503}
EVERY_CLASS = sorted(
    (c for _, c in inspect.getmembers(core.errors, inspect.isclass) if issubclass(c, T25Error)),
    key=lambda c: c.__name__,
)


def test_every_error_class_has_one_stable_code_and_a_documented_status():
    assert {row.kind for row in wire.ERRORS} == set(EVERY_CLASS)
    assert len({row.code for row in wire.ERRORS}) == len(wire.ERRORS)
    assert not {row.code for row in wire.ERRORS} & wire.WIRE_CODES
    assert {row.status for row in wire.ERRORS} <= DOCUMENTED
    assert wire.wire_error(LeaseLost("x")).code == "lease_lost"
    assert wire.wire_error(StaleState("x")) == wire.WireError(StaleState, "stale_state", 409)
    assert wire.error_class("lease_lost") is LeaseLost and wire.error_class("no_route") is None


@pytest.fixture
async def raising(shop):
    """A real serve with one more route, raising the class its path names."""
    env = Env(shop)
    control = await env.open()
    api = make_api(control, worker_credential=CREDENTIAL, operator_token=None)
    by_name = {c.__name__: c for c in EVERY_CLASS}

    async def raise_it(name: str, request: Request) -> None:
        raise by_name[name](f"{name} raised on the server", hint=f"what to do about {name}")

    api.add_api_route("/raise/{name}", raise_it, methods=["GET"])
    async with serving(api) as url:
        yield control, url, local_token(control.config.root)
    await env.close()


@pytest.mark.parametrize("kind", EVERY_CLASS, ids=lambda c: c.__name__)
async def test_a_client_raises_the_class_the_server_raised(raising, kind):
    _, url, token = raising
    http = Http(url, token)
    try:
        with pytest.raises(T25Error) as raised:
            await http.request("GET", f"/raise/{kind.__name__}")
    finally:
        await http.close()
    assert type(raised.value) is kind
    assert raised.value.message == f"{kind.__name__} raised on the server"
    assert raised.value.hint == f"what to do about {kind.__name__}"


async def test_a_409_keeps_its_type_for_the_worker_and_the_cockpit(raising):
    control, url, token = raising
    await control.new_task("Add a greeting", actor="ana")
    task = await control.enter(await control.task("T-1"), TaskState.SPEC, actor="t25")
    runs = HttpRunQueue(url, CREDENTIAL)
    try:
        claim = await runs.claim("w1", 30)
        assert claim is not None and claim.task.id == task.id
        await control.cancel("T-1", actor="ana")  # the lease goes stale
        with pytest.raises(LeaseLost, match="lease on R-1 lost"):
            await runs.heartbeat(claim.lease, 30)
    finally:
        await runs.close()
    async with httpx.AsyncClient(base_url=url) as client:
        stale = {"lease": claim.lease.model_dump(mode="json"), "ttl_s": 30}
        answer = await client.post("/worker/heartbeat", json=stale, headers=WORKER)
        assert answer.status_code == 409 and answer.json()["code"] == "lease_lost"
    async with attach(url, token) as remote:
        with pytest.raises(PolicyRefused, match="only a FAILED task can be retried"):
            await remote.decide(Decision(verb=Verb.RETRY, task="T-1", actor="ana"))
        with pytest.raises(NotFound, match="no task T-9"):
            await remote.detail("T-9")
