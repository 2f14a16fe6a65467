"""The contract between the factory and an agent CLI, and how a role picks one.

An `AgentAdapter` runs one headless agent process for one run and reports an
`AgentResult`; the `adapters` package implements it for each CLI. Which adapter
plays a role is the first of the role's fallback chain whose binary exists and
whose quota is not exhausted (`select_adapter`); the run records which and why.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import datetime
from enum import StrEnum
from pathlib import Path
from typing import TYPE_CHECKING, Protocol, runtime_checkable

from pydantic import BaseModel, ConfigDict

from core.errors import T25Error
from core.domain.models import TaskState, Usage, utcnow

if TYPE_CHECKING:
    from core.config.schema import AgentProfile


class AgentRequest(BaseModel):
    """One run of one role: the prompt, where to run, and the profile's knobs."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    task_id: str
    run_id: str
    role: str
    stage: TaskState
    prompt: str
    cwd: Path
    model: str | None = None
    args: tuple[str, ...] = ()
    timeout_s: float = 1800.0
    env_passthrough: tuple[str, ...] = ()  # the CLI's own login variables, passed when set
    private_home: bool = False              # a fresh HOME and config dir for this run
    sandbox: str = "none"                   # none | bwrap | docker
    sandbox_image: str | None = None        # the image a docker sandbox runs


class Failure(StrEnum):
    """Why an agent run did not produce a usable final answer."""

    EXIT = "exit"          # exited non-zero, or reported an error
    TIMEOUT = "timeout"    # ran past its timeout; its process group was killed
    ABORTED = "aborted"    # stopped by T25 (task cancelled, lease lost, shutdown)
    QUOTA = "quota"        # quota or rate limit exhausted: try the next adapter
    OVERLOAD = "overload"  # the provider is transiently overloaded: retry after a pause
    SPAWN = "spawn"        # could not be started at all


class AgentResult(BaseModel):
    """What an adapter reports when its process has ended."""

    # The log is raw bytes: base64 in JSON, so a remote worker can send any output back.
    model_config = ConfigDict(frozen=True, extra="forbid", ser_json_bytes="base64",
                              val_json_bytes="base64")

    adapter: str
    cli_version: str | None = None
    model: str | None = None
    exit_code: int | None = None
    final_text: str = ""
    usage: Usage = Usage()
    cost_usd: float | None = None  # the CLI's own cost figure, when it reports one
    failure: Failure | None = None
    error: str | None = None
    quota_resets_at: datetime | None = None
    files_changed: tuple[str, ...] = ()
    log: bytes = b""
    duration_s: float = 0.0

    @property
    def ok(self) -> bool:
        return self.failure is None


# Called with ("stdout" | "stderr", text) as output arrives.
OutputSink = Callable[[str, str], Awaitable[None]]


@runtime_checkable
class AgentAdapter(Protocol):
    """One agent CLI, as the factory sees it."""

    name: str

    def locate(self) -> str | None:
        """The binary's path if it is installed, else None."""
        ...

    async def version(self) -> str | None:
        """The CLI's version, read once; None when it cannot be told."""
        ...

    async def run(
        self, request: AgentRequest, sink: OutputSink, abort: asyncio.Event
    ) -> AgentResult:
        """Run the agent to its end, a timeout, or `abort`; never raises for agent failures."""
        ...


class NoAdapter(T25Error):
    """No adapter in a role's chain can run now; the message says why for each."""


@dataclass
class QuotaBook:
    """Adapters whose quota is exhausted, and until when (None: until further notice)."""

    exhausted: dict[str, datetime | None] = field(default_factory=dict)

    def mark(self, adapter: str, until: datetime | None) -> None:
        self.exhausted[adapter] = until

    def blocked_until(self, adapter: str, now: datetime) -> datetime | None | bool:
        """False when usable; otherwise the reset time (or None when unknown)."""
        if adapter not in self.exhausted:
            return False
        until = self.exhausted[adapter]
        if until is not None and until <= now:
            del self.exhausted[adapter]
            return False
        return until


@dataclass(frozen=True)
class Selection:
    adapter: AgentAdapter
    profile: AgentProfile
    reason: str


def select_adapter(
    chain: Sequence[AgentProfile],
    adapters: Mapping[str, AgentAdapter],
    quota: QuotaBook,
    *,
    role: str,
    now: datetime | None = None,
    skip: frozenset[str] = frozenset(),
) -> Selection:
    """The first profile whose adapter is known, installed and not out of quota."""
    now = now or utcnow()
    passed: list[str] = []
    for position, profile in enumerate(chain, start=1):
        name = profile.adapter
        adapter = adapters.get(name)
        if name in skip:
            passed.append(f"{name}: out of quota or overloaded in this run")
        elif adapter is None:
            passed.append(f"{name}: no such adapter (known: {', '.join(sorted(adapters))})")
        elif (until := quota.blocked_until(name, now)) is not False:
            when = f" until {until:%Y-%m-%d %H:%M} UTC" if until else ""
            passed.append(f"{name}: quota exhausted{when}")
        elif adapter.locate() is None:
            passed.append(f"{name}: binary not found on PATH")
        else:
            reason = "first in the chain" if position == 1 else "; ".join(passed)
            return Selection(adapter, profile, f"{name} for {role}: {reason}")
    raise NoAdapter(
        f"no agent can play {role}: " + "; ".join(passed),
        hint=f"install one of them, or change roles.{role} in t25.yaml (see `t25 doctor`)",
    )
