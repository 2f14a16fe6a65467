"""The port every agent CLI adapter implements: run one headless agent, report its result."""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Protocol, runtime_checkable

from core.config.policy_config import QACheck
from core.domain.agent import AgentRequest, AgentResult, CheckSandbox
from core.domain.models import CheckResult

# Called with ("stdout" | "stderr", text) as output arrives, and with ("network", record) for
# each connection the run's network proxy decided (core.domain.network.Connection).
OutputSink = Callable[[str, str], Awaitable[None]]

# Runs one QA check in a tree, confined as told, to its end, a timeout or the abort; its
# outcome is a CheckResult, never an exception (adapters.checks.run_check). The worker runs
# the checks at QA, the control plane on a merge's result.
CheckRunner = Callable[[QACheck, Path, asyncio.Event, CheckSandbox], Awaitable[CheckResult]]


@runtime_checkable
class AgentAdapter(Protocol):
    """One agent CLI, as T25 sees it."""

    name: str

    def locate(self) -> str | None:
        """The binary's path if it is installed, else None."""
        ...

    async def version(self) -> str | None:
        """The CLI's version, read once; None when it cannot be told."""
        ...

    def confines(self, sandbox: str) -> bool:
        """Whether every run under the sandbox setting `sandbox` (a profile's, else the
        project's `sandbox.mode`) runs in bubblewrap here, or does not run at all; known
        before the run, so nothing needs watching outside its worktree."""
        ...

    async def run(
        self, request: AgentRequest, sink: OutputSink, abort: asyncio.Event
    ) -> AgentResult:
        """Run the agent to its end, a timeout, or `abort`; never raises for agent failures."""
        ...
