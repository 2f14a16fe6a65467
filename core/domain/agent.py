"""One agent run as values: what T25 asks of an agent CLI, and what the CLI's run produced.

The `AgentAdapter` port (core.ports) takes an `AgentRequest` and reports an
`AgentResult`; the `adapters` package implements it for each CLI.
"""

from __future__ import annotations

from datetime import datetime
from enum import StrEnum
from pathlib import Path

from pydantic import BaseModel, ConfigDict, Field

from core.config.schema import MAX_LOG_BYTES, Config, Limits
from core.domain.models import TaskState, Usage


class RunCaps(BaseModel):
    """What one run (an agent or a QA check) may use of the machine (adapters.caps)."""

    model_config = ConfigDict(frozen=True, extra="forbid", defer_build=True)

    memory_mib: int  # the run's memory: all its processes together, where a cgroup is had
    processes: int  # the run's processes at once
    cpu_s: int  # CPU seconds, per process

    @classmethod
    def of(cls, limits: Limits) -> RunCaps:
        return cls(
            memory_mib=limits.run_memory_mib,
            processes=limits.run_processes,
            cpu_s=limits.run_cpu_s,
        )


class AgentRequest(BaseModel):
    """One run of one role: the prompt, where to run, and the profile's knobs."""

    model_config = ConfigDict(frozen=True, extra="forbid", defer_build=True)

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
    private_home: bool = False  # a fresh HOME and config dir for this run
    sandbox: str = "none"  # auto | required | bwrap | docker | none (adapters.sandbox)
    sandbox_image: str | None = None  # the image a docker sandbox runs
    network: str = "allowlist"  # allowlist | shared | none: inside a sandbox
    # network: allowlist - what the run may reach beyond its CLI's model endpoints.
    allow_hosts: tuple[str, ...] = ()
    hidden: tuple[Path, ...] = ()  # T25's state, out of a sandboxed run's sight
    read_paths: tuple[Path, ...] = ()  # given back read-only in the hidden homes
    caps: RunCaps | None = None  # None: no caps (a run outside T25's pipeline)
    max_log_bytes: int = MAX_LOG_BYTES  # output kept byte-exact in the log (limits.max_log_bytes)
    # Where the log is spooled while the run goes on: the worker's private area under
    # `.factory/`, never the worktree. None: the system's temp directory.
    log_dir: Path | None = None
    # The CLI session this run continues (a QA or review send-back); None: a fresh session.
    resume_session: str | None = None
    # The tool classes the CLI may offer its model (core.domain.tools); None: the CLI's own
    # defaults, nothing narrowed and none of T25's overhead switches.
    tools: frozenset[str] | None = None
    # Under bubblewrap, the run sees its worktree at the main checkout's own path (with the
    # checkout's environments), so the project's tests it runs import the change
    # (sandbox.tree_at).
    at_checkout: bool = False


class CheckSandbox(BaseModel):
    """How a QA check is confined: the same sandbox as the agents, for the code they wrote."""

    model_config = ConfigDict(frozen=True, extra="forbid", defer_build=True)

    kind: str = "none"  # auto | required | none
    network: str = "none"  # none | allowlist | shared (qa.network)
    allow_hosts: tuple[str, ...] = ()
    hidden: tuple[Path, ...] = ()
    read_paths: tuple[Path, ...] = ()
    run_id: str = ""  # the QA run the checks belong to: their processes carry its tag
    caps: RunCaps | None = None
    at_checkout: bool = False  # the tree seen at the main checkout's path (qa.tree_at)

    @classmethod
    def of(cls, config: Config, project: str | None, run_id: str) -> CheckSandbox:
        """How one project's checks are confined: as its agents are, with the network
        `qa.network` says."""
        policy = config.for_project(project)
        return cls(
            kind=policy.sandbox.mode,
            network=policy.qa.network,
            allow_hosts=tuple(policy.qa.allow_hosts),
            hidden=config.private_paths(),
            read_paths=tuple(policy.sandbox.read_paths),
            run_id=run_id,
            caps=RunCaps.of(policy.limits),
            at_checkout=policy.qa.tree_at == "checkout",
        )


class Failure(StrEnum):
    """Why an agent run did not produce a usable final answer."""

    EXIT = "exit"  # exited non-zero, or reported an error
    TIMEOUT = "timeout"  # ran past its timeout; its process group was killed
    ABORTED = "aborted"  # stopped by T25 (task cancelled, lease lost, shutdown)
    QUOTA = "quota"  # quota or rate limit exhausted: try the next adapter
    OVERLOAD = "overload"  # the provider is transiently overloaded: retry after a pause
    LOGIN = "login"  # the CLI has no working login (none, expired, a bad key): try the next
    SPAWN = "spawn"  # could not be started at all


class RunLog(BaseModel):
    """A run's log, kept in a file rather than in memory: where the file is on this host, its
    size, and the SHA-256 of its content (computed while it was written).

    The log of an agent's run may be tens of MiB; nothing passes it around whole. On the wire
    (a remote worker's completion) `path` is the worker's own and names nothing at serve:
    the worker uploads the file first (`PUT /worker/log`), and serve reads its own copy,
    checked against `size` and `sha256`.
    """

    model_config = ConfigDict(frozen=True, extra="forbid", defer_build=True)

    path: Path
    size: int = Field(ge=0)
    sha256: str = Field(pattern=r"^[0-9a-f]{64}$")


class AgentResult(BaseModel):
    """What an adapter reports when its process has ended."""

    model_config = ConfigDict(frozen=True, extra="forbid", defer_build=True)

    adapter: str
    cli_version: str | None = None
    model: str | None = None
    exit_code: int | None = None
    final_text: str = ""
    usage: Usage = Field(default_factory=Usage)
    requests: tuple[Usage, ...] = ()  # each model request's tokens, as the CLI reported them
    cost_usd: float | None = None  # the CLI's own cost figure, when it reports one
    failure: Failure | None = None
    error: str | None = None
    quota_resets_at: datetime | None = None
    files_changed: tuple[str, ...] = ()
    log: RunLog | None = None  # both streams interleaved, bounded (limits.max_log_bytes)
    duration_s: float = 0.0
    session_id: str | None = None  # the CLI's session, when it reports one
    resumed_session: str | None = None  # the session the run continued (its request's)
    # Whether the process ran in bubblewrap, where the main checkout is out of its reach
    # (adapters.sandbox): then no change there is the run's doing.
    confined: bool = False

    @property
    def ok(self) -> bool:
        return self.failure is None
