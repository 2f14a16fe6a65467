"""The HTTP client of a `t25 serve`, and the run queue a remote worker leases from over it.

`t25 worker --url` (t25_tui.runtime.work_remotely) loads the local t25.yaml (repositories,
roles, QA checks), claims runs from a `t25 serve` control plane through `HttpRunQueue`,
works them in local worktrees with the local agent CLIs, streams output back and
completes under its fencing token. A refusal raises the class the server raised (its
code, t25_tui.api.errors): when the lease is gone (409 `lease_lost`) the agent is stopped
and nothing more is sent. On SIGTERM or SIGINT it hands its leases back to the queue.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

import httpx

from core.domain.events import Event
from core.domain.models import Author, CheckResult, Lease, Run, Task
from core.domain.reports import RunReport
from core.errors import ControlPlaneUnreachable, LeaseLost, T25Error
from core.ports import Claim
from t25_tui.api import errors as wire

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
        refusals: Mapping[int, type[T25Error]] | None = None,
        otherwise: type[T25Error] = T25Error,
        **kw: Any,
    ) -> httpx.Response:
        """Send one request. A status of 400 or more raises the error class the server
        raised (its `code`, t25_tui.api.errors) with its message and hint; a refusal that
        names no class (the Gate's, or a code this client does not know) raises
        `refusals[status]`, or `otherwise`."""
        try:
            response = await self.client.request(method, path, **kw)
        except httpx.HTTPError as exc:
            raise ControlPlaneUnreachable(
                f"{self.url}{path}: {exc or type(exc).__name__}",
                hint="is `t25 serve` running there, and reachable from this host?",
            ) from exc
        if response.status_code >= 400:
            said = refusal(response)
            raised = wire.error_class(said.code)
            if raised is not None:
                raise raised(said.error, hint=said.hint)
            expected = (refusals or {}).get(response.status_code)
            if expected is not None:  # an answer the caller expects
                raise expected(said.error, hint=said.hint)
            raise otherwise(f"{path} answered {response.status_code}: {said.error}", hint=said.hint)
        return response


@dataclass(frozen=True)
class Said:
    """What a refused request was told: T25's `error`, `hint` and `code`, or what there was."""

    error: str
    hint: str | None = None
    code: str | None = None


def refusal(response: httpx.Response) -> Said:
    """What a refused request said: T25's `error`/`hint`/`code`, FastAPI's `detail`, or the text."""
    try:
        body = response.json()
    except ValueError:
        return Said(response.text[:200] or response.reason_phrase)
    if not isinstance(body, dict):
        return Said(str(body)[:200])
    detail = body.get("detail")
    if isinstance(detail, list) and detail:
        return _first_invalid(detail[0])
    hint, code = body.get("hint"), body.get("code")
    return Said(
        str(body.get("error") or detail or body)[:500],
        hint=hint if isinstance(hint, str) else None,
        code=code if isinstance(code, str) else None,
    )


def _first_invalid(first: Any) -> Said:
    """FastAPI's own request validation: the field, and what was wrong with it."""
    if not isinstance(first, dict):
        return Said(str(first)[:200])
    where = ".".join(str(part) for part in first.get("loc", ())[1:])
    return Said(f"{where}: {first.get('msg')}" if where else str(first.get("msg")))


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
        # The server's error class, from its code: LeaseLost when the lease is gone,
        # StaleState when a decision beat this run's. A 409 with no code (an older serve)
        # means the lease is gone; anything else refused is retried with backoff.
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
            tuple(Author.model_validate(a) for a in data.get("authors", [])),
        )

    async def heartbeat(self, lease: Lease, ttl_s: float) -> Lease:
        response = await self._post("/worker/heartbeat", _lease(lease) | {"ttl_s": ttl_s})
        return Lease.model_validate(response.json())

    async def prompt(self, lease: Lease, run: Run, task: Task, checks: list[CheckResult]) -> str:
        body = _lease(lease) | {
            "ttl_s": self.lease_ttl_s,
            "checks": [c.model_dump(mode="json") for c in checks],
        }
        return str((await self._post("/worker/prompt", body)).json()["prompt"])

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
