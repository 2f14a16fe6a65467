"""One generic adapter for every agent CLI; what differs between CLIs is a small spec.

A `CliAdapterSpec` says only what is particular to one CLI: its binary, its arguments, how to
read its output, how it reports an exhausted quota. `CliAdapter` does the rest once for all of
them: finding the binary and its version, passing big prompts through a private temp file,
giving the child a minimal environment, supervising the process (`adapters.process`) and
turning whatever happened into an `AgentResult` - without ever raising for the agent's sake.

A run's stdout is read once, by the spec's `parse`, into a `CliOutput`; everything after that
(the result, the quota and overload checks, the error message) reads that one value.
"""

from __future__ import annotations

import asyncio
import logging
import os
import re
import shutil
import tempfile
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from datetime import datetime
from pathlib import Path
from typing import ClassVar

from adapters.caps import capped
from adapters.checkout_view import CheckoutView
from adapters.containment import run_tag
from adapters.entries import EventShapes
from adapters.homes import home_variables, private_home, run_homes, seen_at_checkout
from adapters.login import LoginProbe
from adapters.netproxy import run_network
from adapters.parsing import classify_error, reset_time
from adapters.process import (
    PARSE_LIMIT,
    ProcessResult,
    minimal_env,
    passthrough_env,
    run_process,
)
from adapters.prompt_files import PromptArg, prompt_arg
from adapters.request_size import FixedPart
from adapters.sandbox import (
    Bubblewrap,
    Confinement,
    Sandbox,
    SandboxUnavailable,
    confines,
    sandbox_for,
)
from core.config.hosts import entry_for_url
from core.domain.agent import AgentRequest, AgentResult, Failure
from core.domain.models import SESSION_ID_PATTERN, TaskState, Usage
from core.domain.network import NETWORK_STREAM, Allowlist, Connection
from core.domain.tools import read_only
from core.ports import OutputSink

log = logging.getLogger("t25.adapters")

VERSION_TIMEOUT_S = 30.0  # a Node CLI starting on a loaded machine has taken over 10 s
_VERSION = re.compile(r"\bv?(\d+\.\d+(?:\.\d+)?(?:[-+.][0-9A-Za-z.]+)?)")


@dataclass(frozen=True)
class CliOutput:
    """What one run of a CLI printed on stdout, read once by its spec's `parse`.

    `error` is an error the CLI itself reported; `is_error` says the CLI called the run a
    failure, whatever its exit status.
    """

    final_text: str = ""
    usage: Usage = field(default_factory=Usage)
    error: str | None = None
    is_error: bool = False
    files_changed: tuple[str, ...] = ()
    resets_at: datetime | None = None  # when the CLI named a quota reset in its events
    cost_usd: float | None = None  # when the CLI reports its own cost
    # The tokens of each model request, in order, as the CLI reports them along the way
    # (`usage` is its own total); how fine that is differs by CLI (`adapters.parsing`).
    requests: tuple[Usage, ...] = ()
    session_id: str | None = None  # the CLI's session, which a later run may resume


@dataclass(frozen=True)
class QuotaSignal:
    """The CLI's quota or rate limit is exhausted; T25 moves to the next adapter."""

    message: str
    resets_at: datetime | None = None


@dataclass(frozen=True)
class Capabilities:
    """What a CLI can do headless, as `t25 doctor` shows it."""

    structured_output: str = "no"  # the output format T25 reads, or "no" (text)
    usage: bool = False  # reports tokens
    cost: bool = False  # reports its own cost in USD
    resume: str = "no"  # how a session is resumed, or "no"
    sandbox_flags: str = "none"  # the CLI's own sandbox / permission flags T25 uses
    # How a later stage's run keeps the CLI from loading the worktree's own settings, hooks
    # and servers (`project_config_off`), or what it cannot switch off.
    project_config_off: str = "no way"
    # How a role's tool set (core.domain.tools) reaches the CLI, or what it cannot narrow.
    tools: str = "no way"


# The runs after the dev agent wrote the tree: whatever it planted there (settings, hooks,
# MCP servers, an endpoint) must not be loaded by them.
LATER_ROLES = frozenset({"qa", "reviewer", "security", "docs"})
LATER_STAGES = frozenset({TaskState.QA, TaskState.REVIEW, TaskState.DOCS})


def project_config_off(request: AgentRequest) -> bool:
    """Whether this run starts its CLI with project-level configuration switched off."""
    return request.role in LATER_ROLES or request.stage in LATER_STAGES


def _version_tuple(text: str) -> tuple[int, ...]:
    return tuple(int(part) for part in re.findall(r"\d+", text.split("-")[0])[:3])


class CliAdapterSpec:
    """What is particular to one agent CLI. Subclass it; override what differs."""

    name: str
    binary: str
    version_args: tuple[str, ...] = ("--version",)
    # The supported range: [min_version, below_version). Newer warns; it never stops a run.
    min_version: str | None = None
    below_version: str | None = None
    tested_version: str | None = None
    # Variables the CLI reads for its own login and endpoints, passed through when set.
    login_env: tuple[str, ...] = ()
    capabilities: Capabilities = Capabilities()
    # Files (relative to a private HOME) written before a run that asked for one.
    home_files: ClassVar[dict[str, str]] = {}
    # The CLI's own login (relative to HOME): bound read-only into a sandboxed run's
    # private HOME, never copied.
    login_files: tuple[str, ...] = ()
    # Where the CLI reaches its model under `network: allowlist` (core.config.hosts entries):
    # the hosts its base-URL variables name, else its vendor's API hosts (`model_hosts`).
    base_url_env: tuple[str, ...] = ()
    vendor_hosts: tuple[str, ...] = ()
    # The CLI's own status command, when it offers one (`t25 doctor` runs it).
    login_probe: LoginProbe | None = None
    needs_login: bool = True  # False for T25's own scripted agent
    # What the CLI reads from a project's tree (its settings, instructions, ignore files), as
    # gitignore-style patterns: a change to one steers every later run, so the default
    # protected paths hold every CLI's (core.config.agent_files).
    project_files: tuple[str, ...] = ()
    # How its JSON events read in a transcript (adapters.transcript); None: plain text.
    transcript: EventShapes | None = None
    # The models `t25 init` names for its dev and for its reviewer (another model, so that a
    # review is not its author's); None: T25 knows no pair (they are the operator's provider's).
    init_models: tuple[str, str] | None = None
    # Where its own installer puts it off PATH (`t25 doctor` looks there for its hint).
    install_dirs: tuple[str, ...] = ()
    # What each request resends (adapters.request_size), per model as measured; and what
    # changes with the model, for `t25 doctor`.
    fixed_parts: ClassVar[Mapping[str, FixedPart]] = {}
    fixed_part_note: str = ""

    def check_version(self, version: str | None) -> tuple[bool, str]:
        """(supported, a note): an unknown or newer version is a warning, never an error."""
        if version is None:
            return False, "version unknown (could not read `--version`)"
        found = _version_tuple(version)
        if self.min_version and found < _version_tuple(self.min_version):
            return False, f"{version} is older than the supported {self.min_version}"
        if self.below_version and found >= _version_tuple(self.below_version):
            return True, (
                f"{version} is newer than tested ({self.tested_version}); "
                "T25 will try it, and reads its output tolerantly"
            )
        return True, f"{version} is supported"

    def build_argv(self, request: AgentRequest, prompt: PromptArg) -> list[str]:
        """The arguments after the binary (the adapter puts the located binary first).
        Pass the prompt so it cannot be read as an option: after `--`, or as an option's value."""
        raise NotImplementedError

    def parse(self, stdout: str) -> CliOutput:
        """Everything T25 needs from a run's stdout; called once per run."""
        raise NotImplementedError

    def error_texts(self, output: CliOutput, stderr: str) -> list[str]:
        """Where this CLI says what went wrong: its reported error, then stderr's lines."""
        return [t for t in (output.error, *stderr.splitlines()[-40:]) if t]

    def detect_quota(self, output: CliOutput, stderr: str) -> QuotaSignal | None:
        """An exhausted quota or rate limit, from the CLI's real messages (`classify_error`)."""
        for text in self.error_texts(output, stderr):
            if classify_error(text) is Failure.QUOTA:
                return QuotaSignal(text.strip(), output.resets_at or reset_time(text))
        return None

    def detect_login(self, output: CliOutput, stderr: str) -> str | None:
        """No working login (none, expired, a refused key), from the CLI's real messages."""
        return self._first(Failure.LOGIN, output, stderr)

    def detect_overload(self, output: CliOutput, stderr: str) -> str | None:
        """A transient overload (529, "at capacity", 5xx) worth retrying after a pause."""
        return self._first(Failure.OVERLOAD, output, stderr)

    def _first(self, kind: Failure, output: CliOutput, stderr: str) -> str | None:
        """The first of the CLI's error texts that means `kind` (`classify_error`)."""
        texts = self.error_texts(output, stderr)
        return next((t.strip() for t in texts if classify_error(t) is kind), None)

    def extra_env(self, request: AgentRequest) -> dict[str, str]:
        """Variables this CLI needs on top of the minimal environment (retry limits, telemetry
        off). `HOME` is already the private one when the request asked for it."""
        return {}

    def tool_args(self, tools: frozenset[str] | None) -> list[str]:
        """Flags that narrow the CLI's own tools to the classes in `tools` (core.domain.tools)
        and switch off its overhead T25 does not need; none for None (the CLI's defaults).
        A spec's `build_argv` adds them with one call."""
        return []

    def tool_env(self, tools: frozenset[str] | None) -> dict[str, str]:
        """Variables to the same end, set on top of `extra_env`; none for None."""
        return {}

    def isolated_args(self, request: AgentRequest) -> list[str]:
        """Arguments that keep the CLI from loading the worktree's own configuration; a spec's
        `build_argv` adds them through `later_args` (only for a later stage)."""
        return []

    def isolated_env(self, request: AgentRequest) -> dict[str, str]:
        """Variables to the same end, set for a later stage's run on top of `extra_env`."""
        return {}

    def later_args(self, request: AgentRequest) -> list[str]:
        return self.isolated_args(request) if project_config_off(request) else []

    def home_env(self, home: Path) -> dict[str, str]:
        """Variables that point the CLI's config dir into a private HOME (e.g. CODEX_HOME)."""
        return {}

    def confined_args(self, argv: list[str]) -> list[str]:
        """The arguments for a run inside T25's bubblewrap, where the CLI's own sandbox may
        not start (it needs capabilities the run does not hold); as built by default."""
        return argv

    # How much of stdout `parse` reads, its head and tail (`adapters.process.PARSE_LIMIT`).
    # A CLI whose final event is its last line needs no more; one that reports its usage
    # all along the output, summed by `parse`, keeps more.
    parse_limit: int = PARSE_LIMIT

    # Flags T25 sets itself; a profile repeating them would change how output is read.
    owned_flags: tuple[str, ...] = ()

    def config_problems(self, profile_model: str | None, args: list[str]) -> list[str]:
        """What looks wrong in a profile for this CLI (`t25 doctor`)."""
        return [
            f"args: {arg} is set by T25 itself; remove it"
            for arg in args
            if arg.split("=")[0] in self.owned_flags
        ]

    def locate(self) -> str | None:
        return shutil.which(self.binary)

    def base_urls(self, env: Mapping[str, str], args: Sequence[str]) -> list[str]:
        """The model endpoints this run's settings name: its base-URL variables (a spec
        whose CLI takes them elsewhere - its arguments, a config file - adds those)."""
        return [env[name] for name in self.base_url_env if env.get(name)]

    def model_hosts(self, env: Mapping[str, str], args: Sequence[str]) -> list[str]:
        """The allowlist entries the CLI needs to reach its model in this run: the
        endpoints its settings name, else its vendor's API hosts."""
        named = [entry for url in self.base_urls(env, args) if (entry := entry_for_url(url))]
        return list(dict.fromkeys(named)) or list(self.vendor_hosts)


def log_spool(request: AgentRequest) -> Path:
    """A new 0600 file for the run's log: in the request's `log_dir` (the worker's private
    area), else the temp directory; never the worktree. Its run's worker removes it once the
    run is reported."""
    where = request.log_dir or Path(tempfile.gettempdir())
    where.mkdir(parents=True, exist_ok=True, mode=0o700)
    fd, name = tempfile.mkstemp(prefix=f"{request.run_id}-{os.getpid()}-", suffix=".log", dir=where)
    os.close(fd)
    return Path(name)


def _relative(files: tuple[str, ...], cwd: Path) -> tuple[str, ...]:
    """Paths as the worktree sees them: absolute ones inside it made relative, no repeats."""
    out = []
    for name in files:
        path = Path(name)
        if path.is_absolute() and path.is_relative_to(cwd):
            name = str(path.relative_to(cwd))
        out.append(name)
    return tuple(dict.fromkeys(out))


def _session_id(found: str | None) -> str | None:
    """The session id the CLI reported, when it is one T25 can pass back to it safely."""
    return found if found and re.fullmatch(SESSION_ID_PATTERN, found) else None


def _one_line(text: str, limit: int = 300) -> str:
    line = " ".join(text.split())
    return line if len(line) <= limit else line[: limit - 1] + "…"


class CliAdapter:
    """An `AgentAdapter` for any CLI described by a `CliAdapterSpec`."""

    def __init__(self, spec: CliAdapterSpec, *, grace_s: float = 2.0) -> None:
        self.warning: str | None = None  # set once the version is read: newer than tested
        self.spec = spec
        self.name = spec.name
        self.grace_s = grace_s
        self._version: str | None = None
        self._version_read = False
        self._probe: asyncio.Task[str | None] | None = None  # `--version` under way

    def locate(self) -> str | None:
        return self.spec.locate()

    def confines(self, sandbox: str) -> bool:
        return confines(sandbox)  # every run goes through `sandbox_for`, in `_ready`

    async def version(self) -> str | None:
        """The CLI's version, read once: callers that ask while it is being read (a worker
        pool reads it as it starts, its first run announces it) share the one `--version`."""
        if self._version_read:
            return self._version
        loop = asyncio.get_running_loop()
        probe = self._probe
        if probe is None or probe.done() or probe.get_loop() is not loop:
            probe = self._probe = loop.create_task(self._read_version())
        return await asyncio.shield(probe)

    async def _read_version(self) -> str | None:
        path = self.locate()
        if path is None:
            return None  # not cached: it may be installed later
        done = await run_process(
            [path, *self.spec.version_args],
            cwd=Path(tempfile.gettempdir()),
            env=minimal_env(),
            timeout_s=VERSION_TIMEOUT_S,
            abort=asyncio.Event(),
            grace_s=0.5,
            log_limit=65536,
        )
        found = _VERSION.search(done.log.decode("utf-8", "replace"))
        if found is None and done.timed_out:
            log.warning(
                "%s: `--version` took over %g s; asked again next run", self.name, VERSION_TIMEOUT_S
            )
            return None  # a loaded machine, not an unknown version: not kept
        self._version, self._version_read = (found.group(1) if found else None), True
        supported, note = self.spec.check_version(self._version)
        if not supported or "newer" in note:
            self.warning = f"{self.name}: {note}"
            log.warning("%s", self.warning)
        return self._version

    def environment(self, request: AgentRequest, home: Path | None) -> dict[str, str]:
        """The minimal environment, the CLI's own login variables when set, the spec's
        settings, and a private HOME when there is one. Never T25's own secrets."""
        extra = passthrough_env((*self.spec.login_env, *request.env_passthrough))
        if home is not None:
            extra.update(home_variables(home))
            extra.update(self.spec.home_env(home))
        extra.update(self.spec.extra_env(request))
        extra.update(self.spec.tool_env(request.tools))
        if project_config_off(request):
            extra.update(self.spec.isolated_env(request))
        return minimal_env(extra)

    async def run(
        self, request: AgentRequest, sink: OutputSink, abort: asyncio.Event
    ) -> AgentResult:
        ready = await self._ready(request)
        if isinstance(ready, AgentResult):
            return ready
        path, version, sandbox = ready
        # Inside a sandbox the real HOME is read-only: the CLI gets a private one.
        wants_home = request.private_home or sandbox.unconfined is None
        with (
            prompt_arg(request.prompt, request.cwd) as prompt,
            private_home(wants_home, self.spec.home_files) as home,
            seen_at_checkout(request.cwd, sandbox, request.at_checkout, request.hidden) as view,
        ):
            # The CLI is told where it runs as it sees it: the checkout's path, with a view.
            seen = request.model_copy(update={"cwd": view.checkout}) if view else request
            env = self.environment(seen, home)
            allowlist = Allowlist.of(
                [*self.spec.model_hosts(env, request.args), *request.allow_hosts]
            )

            async def record(connection: Connection) -> None:
                await sink(NETWORK_STREAM, connection.to_text())

            box = self._confinement(request, prompt, home, sandbox, view)
            args = self.spec.build_argv(seen, prompt)
            if sandbox.name == "bwrap":
                args = self.spec.confined_args(args)
            async with run_network(box, allowlist, record) as (box, _):
                confined = sandbox.wrap([path, *args], box, env)
                async with capped(confined, request.caps, request.run_id) as run:
                    done = await run_process(
                        run.argv,
                        cwd=request.cwd,
                        env=env,
                        timeout_s=request.timeout_s,
                        abort=abort,
                        on_output=sink,
                        grace_s=self.grace_s,
                        log_limit=request.max_log_bytes,
                        parse_limit=self.spec.parse_limit,
                        tag=run_tag(request.run_id),
                        namespaced=sandbox.ends_its_processes,
                        log_to=log_spool(request),
                    )
                    over = run.hit(done.exit_code, done.signal)
        result = self._result(seen, version, done, over)
        return result.model_copy(update={"confined": isinstance(sandbox, Bubblewrap)})

    async def _ready(self, request: AgentRequest) -> tuple[str, str | None, Sandbox] | AgentResult:
        """The CLI's binary, its version and the sandbox the run gets; or the failed result
        of a run that cannot start (no binary, or no sandbox: never run unsandboxed instead)."""
        path = self.locate()
        if path is None:
            return AgentResult(
                adapter=self.name,
                model=request.model,
                failure=Failure.SPAWN,
                error=f"{self.spec.binary}: not found on PATH",
            )
        version = await self.version()
        try:
            sandbox = sandbox_for(request.sandbox, image=request.sandbox_image)
            await sandbox.check()
        except SandboxUnavailable as exc:
            return AgentResult(
                adapter=self.name,
                cli_version=version,
                model=request.model,
                failure=Failure.SPAWN,
                error=f"sandbox {request.sandbox} cannot be had: {exc}; "
                "the run is refused rather than run unsandboxed",
            )
        return path, version, sandbox

    def _confinement(
        self,
        request: AgentRequest,
        prompt: PromptArg,
        home: Path | None,
        sandbox: Sandbox,
        view: CheckoutView | None = None,
    ) -> Confinement:
        """What a sandboxed run may touch: its worktree and HOME, the prompt file and the
        CLI's login read-only; T25's state and other runs' homes hidden; the network its
        sandbox can give (an allowlist needs bubblewrap's network namespace)."""
        readonly = [(p, p) for p in (prompt.path,) if p is not None]
        if home is not None:
            readonly += [(Path.home() / f, home / f) for f in self.spec.login_files]
        return Confinement(
            worktree=request.cwd,
            home=home,
            readonly=readonly,
            hidden=(*request.hidden, run_homes()),
            network=sandbox.network(request.network),
            read_paths=request.read_paths,
            # A role that may change no file gets a worktree it cannot change.
            worktree_writable=not read_only(request.tools),
            view=view,
        )

    def _read(self, stdout: str) -> tuple[CliOutput, str | None]:
        """The spec's reading of stdout, and why there is none when its parser choked (output
        it did not foresee is the agent's doing: the run fails, T25 does not raise)."""
        try:
            return self.spec.parse(stdout), None
        except Exception as exc:  # noqa: BLE001 - any parser error is the output's fault
            return CliOutput(is_error=True), f"unreadable output: {exc}"

    def _result(
        self,
        request: AgentRequest,
        version: str | None,
        done: ProcessResult,
        over: str | None = None,  # the resource cap the run ran into (adapters.caps)
    ) -> AgentResult:
        output, unreadable = self._read(done.stdout.decode("utf-8", "replace"))
        failure, error, resets_at = self._failure(request, done, output, unreadable)
        if over is not None:  # it ran into a cap: that is why it ended as it did, if it did
            failure, error, resets_at = (
                Failure.EXIT,
                f"{over}; the run's processes were killed",
                None,
            )
        return AgentResult(
            adapter=self.name,
            cli_version=version,
            model=output.usage.model or request.model,
            exit_code=done.exit_code,
            final_text=output.final_text,
            usage=output.usage,
            requests=output.requests,
            files_changed=_relative(output.files_changed, request.cwd),
            log=done.log_file,
            cost_usd=output.cost_usd,
            duration_s=done.duration_s,
            failure=failure,
            error=error,
            quota_resets_at=resets_at,
            session_id=_session_id(output.session_id),
            resumed_session=request.resume_session,
        )

    def _failure(
        self, request: AgentRequest, done: ProcessResult, output: CliOutput, unreadable: str | None
    ) -> tuple[Failure | None, str | None, datetime | None]:
        """How the run failed, what to tell the operator, and when a quota resets; all None
        for a success."""
        if stopped := _stopped(request, done):
            return (*stopped, None)
        if done.exit_code == 0 and not output.is_error:
            return None, None, None
        stderr = done.stderr.decode("utf-8", "replace")
        if quota := self.spec.detect_quota(output, stderr):
            return Failure.QUOTA, _one_line(quota.message), quota.resets_at
        if login := self.spec.detect_login(output, stderr):
            return Failure.LOGIN, _one_line(login), None
        if overload := self.spec.detect_overload(output, stderr):
            return Failure.OVERLOAD, _one_line(overload), None
        detail = output.error or unreadable or done.stderr_tail
        status = _exit_status(done)
        return Failure.EXIT, _one_line(f"{status}: {detail}" if detail else status), None


def _stopped(request: AgentRequest, done: ProcessResult) -> tuple[Failure, str] | None:
    """Why the CLI did not run to its own end, if it did not: it never started, T25 stopped
    it, or its time ran out."""
    if done.spawn_error:
        return Failure.SPAWN, done.spawn_error
    if done.aborted:
        return Failure.ABORTED, "aborted by T25; process group killed"
    if done.timed_out:
        return Failure.TIMEOUT, f"timed out after {request.timeout_s:g} s; process group killed"
    return None


def _exit_status(done: ProcessResult) -> str:
    if done.exit_code == 0:
        return "reported an error"
    if done.signal is not None:
        return f"killed by signal {done.signal}"
    return f"exited with status {done.exit_code}"
