"""Rows to domain objects, once for both backends.

The SQLite and Postgres schemas keep the same columns under the same names, and each
store's queries select them so; a row is anything that gives a column's value by name
(asyncpg's Record, sqlite3.Row). The drivers differ in the values they hand back:

- times: Postgres's `timestamptz` arrives as an aware datetime, SQLite keeps seconds since
  the epoch (a REAL). That is the one thing a `RowReader` is told: how to read a time.
- booleans: asyncpg gives True and False, SQLite 1 and 0; `bool()` reads both.
- event payloads: both arrive as JSON text (asyncpg hands jsonb over as text).

Ids are numbers in the tables and `T-12`, `R-3`, `A-7` in the domain.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any, Protocol

from core.domain.cost import CostGroup, TaskCost
from core.domain.events import Event
from core.domain.evidence import PastCosts
from core.domain.models import (
    Artifact,
    ArtifactMeta,
    AuditAnchor,
    Lease,
    Project,
    Run,
    Task,
    Usage,
    format_id,
    parse_id,
)


def requests_text(requests: Iterable[Usage]) -> str:
    """A run's `requests` column: its requests' counts as a JSON array (migration 0013)."""
    return json.dumps([r.model_dump(exclude_none=True) for r in requests], separators=(",", ":"))


class Row(Protocol):
    """A driver's row: a column's value by its name."""

    def __getitem__(self, column: str, /) -> Any: ...


def from_epoch(seconds: float) -> datetime:
    """A SQLite time (seconds since the epoch) as an aware datetime in UTC."""
    return datetime.fromtimestamp(seconds, UTC)


def as_utc(at: datetime) -> datetime:
    """An aware datetime in UTC; a naive one is taken as UTC, never as local time."""
    return at.replace(tzinfo=UTC) if at.tzinfo is None else at.astimezone(UTC)


def id_or_none(prefix: str, number: int | None) -> str | None:
    return None if number is None else format_id(prefix, number)


def number_or_none(prefix: str, ref: str | None) -> int | None:
    """The table's number of a domain id (`T-12` → 12), None for None."""
    return None if ref is None else parse_id(prefix, ref)


def project(r: Row) -> Project:
    return Project(name=r["name"], repo_path=r["repo_path"], default_branch=r["default_branch"])


def anchor(r: Row) -> AuditAnchor:
    return AuditAnchor(seq=r["seq"], hash=r["hash"])


def wanted_roles(roles: Mapping[str, str | None]) -> str:
    """The roles (and each one's model, or None) a `past_costs` read asks for, as the JSON
    array of {role, model} both stores' statements read."""
    return json.dumps([{"role": role, "model": model} for role, model in roles.items()])


def cost_group(r: Row) -> CostGroup:
    return CostGroup(
        role=r["role"],
        adapter=r["adapter"],
        model=r["model"],
        stage=r["stage"],
        runs=int(r["runs"]),
        requests=int(r["requests"]),
        input_tokens=int(r["input_tokens"]),
        output_tokens=int(r["output_tokens"]),
        cache_read_tokens=int(r["cache_read_tokens"]),
        cache_write_tokens=int(r["cache_write_tokens"]),
        usd=float(r["usd"]),
        first_run=int(r["first_run"]),
    )


def task_cost(r: Row) -> TaskCost:
    return TaskCost(
        task_id=format_id("T", r["task_id"]),
        runs=int(r["runs"]),
        tokens=int(r["tokens"]),
        usd=float(r["usd"]),
    )


def past_costs(r: Row) -> PastCosts:
    return PastCosts(runs=int(r["runs"]), low_usd=float(r["low"]), high_usd=float(r["high"]))


@dataclass(frozen=True)
class RowReader:
    """Tasks, runs, leases, events and artifacts from rows whose times `time` reads."""

    time: Callable[[Any], datetime]

    def _maybe_time(self, value: Any) -> datetime | None:
        return None if value is None else self.time(value)

    def task(self, r: Row) -> Task:
        return Task(
            id=format_id("T", r["id"]),
            project=r["project"],
            title=r["title"],
            type=r["type"],
            description=r["description"],
            state=r["state"],
            resume_state=r["resume_state"],
            archived=bool(r["archived"]),
            merged=bool(r["merged"]),
            qa_loops=r["qa_loops"],
            review_loops=r["review_loops"],
            error=r["error"],
            approved_plan_sha=r["approved_plan_sha"],
            checks_passed=None if r["checks_passed"] is None else bool(r["checks_passed"]),
            review_verdict=r["review_verdict"],
            reviewed_head=r["reviewed_head"],
            violation=r["violation"],
            protected_paths=tuple(json.loads(r["protected_paths"] or "[]")),
            rewind_to=r["rewind_to"],
            branch_head=r["branch_head"],
            budget_usd=r["budget_usd"],
            budget_tokens=r["budget_tokens"],
            role_budgets=json.loads(r["role_budgets"] or "{}"),
            priority=r["priority"],
            after=tuple(json.loads(r["after_tasks"] or "[]")),
            request_key=r["request_key"],
            created_at=self.time(r["created_at"]),
            state_since=self.time(r["state_since"]),
        )

    def run(self, r: Row) -> Run:
        usage = Usage(
            input_tokens=r["input_tokens"],
            output_tokens=r["output_tokens"],
            cache_read_tokens=r["cache_read_tokens"],
            cache_write_tokens=r["cache_write_tokens"],
            model=r["usage_model"],
        )
        return Run(
            id=format_id("R", r["id"]),
            task_id=format_id("T", r["task_id"]),
            stage=r["stage"],
            role=r["role"],
            status=r["status"],
            attempts=r["attempts"],
            max_attempts=r["max_attempts"],
            worker=r["worker"],
            lease_token=r["lease_token"],
            lease_expires_at=self._maybe_time(r["lease_expires_at"]),
            adapter=r["adapter"],
            adapter_reason=r["adapter_reason"],
            cli_version=r["cli_version"],
            model=r["model"],
            exit_code=r["exit_code"],
            error=r["error"],
            usage=usage,
            requests=tuple(Usage(**entry) for entry in json.loads(r["requests"])),
            cost_usd=r["cost_usd"],
            session_id=r["session_id"],
            resumed_session=r["resumed_session"],
            enqueued_at=self.time(r["enqueued_at"]),
            started_at=self._maybe_time(r["started_at"]),
            finished_at=self._maybe_time(r["finished_at"]),
        )

    def runs(self, rows: Iterable[Row]) -> list[Run]:
        """Runs in id order, however the statement returned them."""
        return sorted((self.run(r) for r in rows), key=lambda run: parse_id("R", run.id))

    def lease(self, r: Row) -> Lease:
        return Lease(
            run_id=format_id("R", r["id"]),
            task_id=format_id("T", r["task_id"]),
            token=r["lease_token"],
            worker=r["worker"],
            expires_at=self.time(r["lease_expires_at"]),
        )

    def event(self, r: Row) -> Event:
        return Event.restore(
            r["kind"],
            json.loads(r["payload"]),
            id=r["id"],
            at=self.time(r["at"]),
            task_id=id_or_none("T", r["task_id"]),
            run_id=id_or_none("R", r["run_id"]),
        )

    def artifact(self, r: Row, *, size: int | None = None) -> Artifact:
        """`size`: the content's, when the row was written without it (an insert's)."""
        meta = ArtifactMeta(
            kind=r["kind"],
            media_type=r["media_type"],
            task_id=id_or_none("T", r["task_id"]),
            run_id=id_or_none("R", r["run_id"]),
            role=r["role"],
            adapter=r["adapter"],
            cli_version=r["cli_version"],
            model=r["model"],
        )
        return Artifact(
            id=format_id("A", r["id"]),
            sha256=r["sha256"],
            size=r["size"] if size is None else size,
            meta=meta,
            created_at=self.time(r["created_at"]),
        )
