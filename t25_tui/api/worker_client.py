"""`t25 worker --url`: a worker on the host where the code lives, leasing over HTTP.

It loads the local t25.yaml (repositories, roles, QA checks), claims runs from a
`t25 serve` control plane, works them in local worktrees with the local agent CLIs,
streams output back and completes under its fencing token. When the control plane
answers 409, the lease is gone: the agent is stopped and nothing more is sent. On
SIGTERM or SIGINT it hands its leases back to the queue.
"""

from __future__ import annotations

import asyncio
import logging
import signal
from typing import Any

import httpx

from core.domain.events import Event
from core.domain.models import CheckResult, Lease, Run, Task
from core.domain.reports import RunReport
from core.errors import ControlPlaneUnreachable, LeaseLost, T25Error
from core.ports import Claim

log = logging.getLogger("t25.remote")


class Http:
    """A client of one `t25 serve`: its base URL, a bearer secret, refusals as T25 errors."""

    def __init__(self, url: str, secret: str | None, *, timeout_s: float = 30.0) -> None:
        self.url = url.rstrip("/")
        self.client = httpx.AsyncClient(
            base_url=self.url,
            timeout=timeout_s,
            headers={"Authorization": f"Bearer {secret}"} if secret else {},
        )

    async def close(self) -> None:
        await self.client.aclose()

    async def request(
        self,
        method: str,
        path: str,
        *,
        refusals: dict[int, type[T25Error]] | None = None,
        otherwise: type[T25Error] = T25Error,
        **kw: Any,
    ) -> httpx.Response:
        """Send one request; a status of 400 or more raises `refusals[status]` (or
        `otherwise`) carrying the control plane's own message and hint."""
        try:
            response = await self.client.request(method, path, **kw)
        except httpx.HTTPError as exc:
            raise ControlPlaneUnreachable(
                f"{self.url}{path}: {exc or type(exc).__name__}",
                hint="is `t25 serve` running there, and reachable from this host?",
            ) from exc
        if response.status_code >= 400:
            error, hint = refusal(response)
            if response.status_code in (refusals or {}):  # an answer the caller expects
                raise refusals[response.status_code](error, hint=hint)
            raise otherwise(f"{path} answered {response.status_code}: {error}", hint=hint)
        return response


def refusal(response: httpx.Response) -> tuple[str, str | None]:
    """What a refused request said: T25's `error`/`hint`, FastAPI's `detail`, or the text."""
    try:
        body = response.json()
    except ValueError:
        return response.text[:200] or response.reason_phrase, None
    if not isinstance(body, dict):
        return str(body)[:200], None
    detail = body.get("detail")
    if isinstance(detail, list) and detail:  # request validation: name the field
        first = detail[0]
        where = ".".join(str(part) for part in first.get("loc", ())[1:])
        return f"{where}: {first.get('msg')}" if where else str(first.get("msg")), None
    return str(body.get("error") or detail or body)[:500], body.get("hint")


class HttpRunQueue:
    """The run queue (core.ports.RunQueue) of a `t25 serve`, over its REST API."""

    def __init__(
        self, url: str, credential: str, *, lease_ttl_s: float = 30.0, timeout_s: float = 30.0
    ) -> None:
        self.lease_ttl_s = lease_ttl_s  # every call that proves the lease also extends it
        self.http = Http(url, credential, timeout_s=timeout_s)

    async def close(self) -> None:
        await self.http.close()

    async def _post(self, path: str, body: dict[str, Any]) -> httpx.Response:
        # 409: the lease is gone. Anything else refused is retried with backoff.
        return await self.http.request(
            "POST", path, json=body, refusals={409: LeaseLost}, otherwise=ControlPlaneUnreachable
        )

    async def claim(self, worker: str, ttl_s: float) -> Claim | None:
        response = await self._post("/worker/claim", {"worker": worker, "ttl_s": ttl_s})
        if response.status_code == 204:
            return None
        data = response.json()
        return Claim(
            Lease.model_validate(data["lease"]),
            Run.model_validate(data["run"]),
            Task.model_validate(data["task"]),
        )

    async def heartbeat(self, lease: Lease, ttl_s: float) -> Lease:
        response = await self._post("/worker/heartbeat", _lease(lease) | {"ttl_s": ttl_s})
        return Lease.model_validate(response.json())

    async def prompt(self, lease: Lease, run: Run, task: Task, checks: list[CheckResult]) -> str:
        body = _lease(lease) | {
            "ttl_s": self.lease_ttl_s,
            "checks": [c.model_dump(mode="json") for c in checks],
        }
        return (await self._post("/worker/prompt", body)).json()["prompt"]

    async def record(self, lease: Lease, event: Event) -> None:
        raw = {"kind": event.kind, **event.model_dump(mode="json", exclude={"id"})}
        await self._post(
            "/worker/events", _lease(lease) | {"ttl_s": self.lease_ttl_s, "events": [raw]}
        )

    async def complete(self, lease: Lease, report: RunReport) -> None:
        await self._post(
            "/worker/complete", _lease(lease) | {"report": report.model_dump(mode="json")}
        )

    async def release(self, lease: Lease) -> None:
        await self._post("/worker/release", _lease(lease))


def _lease(lease: Lease) -> dict[str, Any]:
    return {"lease": lease.model_dump(mode="json")}


async def work_remotely(
    url: str,
    credential: str,
    config,
    *,
    workers: int,
    lease_ttl_s: float = 30.0,
    heartbeat_s: float = 5.0,
) -> None:
    """Run `workers` workers against the control plane at `url` until SIGTERM/SIGINT."""
    from adapters.checks import run_check
    from adapters.registry import builtin_adapters
    from core.worker.selection import QuotaBook
    from core.worker.worker import Worker, host_name
    from core.workspace.worktrees import Workspace, owner_of

    runs = HttpRunQueue(url, credential, lease_ttl_s=lease_ttl_s)
    workspace = Workspace(config, owner=owner_of(url))
    quota = QuotaBook()
    crew = [
        Worker(
            runs,
            workspace,
            builtin_adapters(),
            run_check,
            quota=quota,
            name=f"{host_name()}-r{i}",
            lease_ttl_s=lease_ttl_s,
            heartbeat_s=heartbeat_s,
        )
        for i in range(1, workers + 1)
    ]
    running = [asyncio.create_task(_keep_working(w)) for w in crew]
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGTERM, signal.SIGINT):
        loop.add_signal_handler(sig, stop.set)
    try:
        await stop.wait()
    finally:
        for t in running:  # a cancelled worker stops its agent and hands its lease back
            t.cancel()
        await asyncio.gather(*running, return_exceptions=True)
        await runs.close()


async def _keep_working(worker) -> None:
    """A worker that outlives a control plane restart: retry with backoff."""
    delay = 0.5
    while True:
        try:
            await worker.run_forever(poll_s=0.5)
            return
        except ControlPlaneUnreachable as exc:
            log.warning("%s; retrying in %.1f s", exc, delay)
            await asyncio.sleep(delay)
            delay = min(delay * 2, 10.0)
