"""Running one child process under supervision: the machinery every agent CLI and QA check shares.

An agent CLI is untrusted, long-running and chatty. It may print a single line of megabytes,
fill stdout and stderr at once, hang, ignore SIGTERM, or leave children behind. So a child is
started with an argv list (never a shell) in a session of its own, both pipes are read
concurrently in chunks, output is decoded incrementally and streamed to a sink, and when it
must stop - timeout, abort, cancellation - its whole process group is signalled: SIGTERM,
a grace period, then SIGKILL. Even after a normal exit the group is killed, so nothing an
agent started outlives its run. Whatever it prints is redacted of T25's own secrets before it
is kept or streamed (`adapters.redact`). And however a run ends, the leader is reaped and both pipes
are closed before `run_process` returns or raises: nothing of the child is left for the
garbage collector. Nothing here blocks the event loop.

    run_process(argv, cwd=..., env=..., timeout_s=..., abort=..., on_output=...) -> ProcessResult
    minimal_env(extra)  -> the allowlisted environment a child gets
"""

from __future__ import annotations

import asyncio
import codecs
import os
import signal
import time
from collections.abc import Awaitable, Callable, Iterable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any, TypeVar

from adapters import containment
from adapters.output_buffers import Capped, LogHead
from adapters.redact import RedactedStream, Redactor
from core.config import held_secrets
from core.config.schema import MAX_LOG_BYTES
from core.domain.agent import RunLog
from core.workspace.git import close_pipes, let_go, unstoppable

CHUNK = 65536
DEFAULT_LOG_LIMIT = MAX_LOG_BYTES
# What is kept of each stream for reading the run's result (its head and tail): the CLI's
# final event is its last line. The whole output goes to the log (`LogHead`), not here, so a
# flood costs the parser no more than this.
PARSE_LIMIT = 4 * 2**20

# What a child may inherit from T25's environment; everything else (T25's own secrets such as
# FACTORY_WORKER_CREDENTIAL or T25_DATABASE_URL, provider keys, tokens) stays behind.
ENV_ALLOWLIST = ("PATH", "HOME", "USER", "LOGNAME", "LANG", "LC_ALL", "TMPDIR")

# Never handed to a child, even when a profile names them (the config refuses that too).
NEVER_PASSED = frozenset(held_secrets.NAMES)
# How a host reaches the network: agent CLIs need these to talk to their provider.
NETWORK_ENV = (
    "HTTPS_PROXY",
    "HTTP_PROXY",
    "NO_PROXY",
    "https_proxy",
    "http_proxy",
    "no_proxy",
    "SSL_CERT_FILE",
    "SSL_CERT_DIR",
    "NODE_EXTRA_CA_CERTS",
)

OutputCallback = Callable[[str, str], Awaitable[None]]
T = TypeVar("T")


def passthrough_env(names: Iterable[str]) -> dict[str, str]:
    """The named variables that are set in T25's environment, minus T25's own secrets."""
    return {
        name: os.environ[name] for name in names if name in os.environ and name not in NEVER_PASSED
    }


def minimal_env(extra: Mapping[str, str] | None = None) -> dict[str, str]:
    """The allowlisted part of T25's environment, TERM=dumb, and `extra` on top."""
    env = {key: os.environ[key] for key in ENV_ALLOWLIST if key in os.environ}
    env["TERM"] = "dumb"
    env.update(extra or {})
    for name in NEVER_PASSED:
        env.pop(name, None)
    return env


@dataclass(frozen=True)
class ProcessResult:
    """How a child process ended and what it printed, bounded (`Capped`, `LogHead`)."""

    exit_code: int | None  # None when it did not exit by itself (killed, or never started)
    stdout: bytes  # each stream's head and tail (`Capped`), for reading the result
    stderr: bytes
    log: bytes  # both streams interleaved as they arrived: their first bytes (`LogHead`)...
    log_file: RunLog | None = None  # ... or, when it was spooled to a file, that file
    tail: bytes = b""  # ... and their last TAIL_BYTES, wherever the log was cut
    timed_out: bool = False
    aborted: bool = False
    duration_s: float = 0.0
    signal: int | None = None  # the signal that ended it, if one did
    spawn_error: str | None = None

    @property
    def stderr_tail(self) -> str:
        """The last non-empty line of stderr: usually the most useful one-line error."""
        lines = self.stderr.decode("utf-8", "replace").strip().splitlines()
        return lines[-1].strip() if lines else ""


def _signal_group(pgid: int, sig: int) -> None:
    try:
        os.killpg(pgid, sig)
    except (ProcessLookupError, PermissionError):
        pass  # the group is already gone


def _spawn_error(exc: BaseException, argv: list[str], cwd: Path) -> str:
    if (
        isinstance(exc, FileNotFoundError)
        and exc.filename is not None
        and os.fspath(exc.filename) == os.fspath(cwd)
    ):
        return f"working directory not found: {cwd}"
    if isinstance(exc, FileNotFoundError):
        return f"command not found: {argv[0]}"
    if isinstance(exc, PermissionError):
        return f"permission denied: {argv[0]}"
    return f"could not start {argv[0]}: {exc}"


async def _pump(
    stream: asyncio.StreamReader,
    name: str,
    own: Capped,
    log: LogHead,
    on_output: OutputCallback | None,
    redacted: RedactedStream,
) -> Exception | None:
    """Read one pipe to its end in chunks (a line may be any length); return the sink's error.

    Each chunk is redacted of T25's secrets (`adapters.redact`) before it is kept or streamed.

    A failing sink is T25's bug, not the agent's: the pipe is still read to its end, so the
    child never blocks on a full pipe, and the error is raised once the child has ended.
    """
    decoder = codecs.getincrementaldecoder("utf-8")(errors="replace")
    failure: Exception | None = None

    async def emit(text: str) -> None:
        nonlocal failure
        if text and on_output is not None and failure is None:
            try:
                await on_output(name, text)
            except Exception as exc:  # noqa: BLE001 - kept, and raised once the child has ended
                failure = exc

    while raw := await stream.read(CHUNK):
        chunk = redacted.feed(raw)
        own.add(chunk)
        await log.add(chunk)
        await emit(decoder.decode(chunk))
    rest = redacted.flush()
    own.add(rest)
    await log.add(rest)
    await emit(decoder.decode(rest, final=True))
    return failure


async def _exit(proc: asyncio.subprocess.Process) -> None:
    """Wait for the leader itself to exit, the moment it does.

    `Process.wait()` also waits for both pipes to close, which a child the agent left behind
    can postpone forever; `returncode` is set as soon as the leader is reaped. A pidfd turns
    readable when the leader exits, so T25 learns of it at once instead of by polling.
    """
    if proc.returncode is None:
        try:
            fd = os.pidfd_open(proc.pid)
        except (AttributeError, OSError):  # no pidfd here, or already reaped
            fd = None
        if fd is not None:
            loop = asyncio.get_running_loop()
            exited: asyncio.Future[None] = loop.create_future()

            def readable() -> None:
                if not exited.done():
                    exited.set_result(None)

            loop.add_reader(fd, readable)
            try:
                await exited
            finally:
                loop.remove_reader(fd)
                os.close(fd)
    # The child watcher reaps it a moment later and sets `returncode`, with nothing to wait on.
    while proc.returncode is None:  # noqa: ASYNC110 - no event marks the reaping
        await asyncio.sleep(0.002)


async def _stop(proc: asyncio.subprocess.Process, grace_s: float) -> None:
    """SIGTERM the group, give it `grace_s` to exit, then SIGKILL it."""
    _signal_group(proc.pid, signal.SIGTERM)
    try:
        await asyncio.wait_for(_exit(proc), timeout=grace_s)
    except TimeoutError:
        pass
    _signal_group(proc.pid, signal.SIGKILL)
    await _exit(proc)


async def _let_go(
    proc: asyncio.subprocess.Process, helpers: tuple[asyncio.Task[object], ...] = ()
) -> None:
    """Close both pipes, then wait until the leader is reaped, the pipes are closed and the
    (cancelled) helpers have ended. The group is already dead; run it `unstoppable`.

    Left to itself, asyncio reaps a killed child a moment later, on a watcher thread that
    hands the exit status to the loop. If the loop has closed by then, the status never
    arrives, and the garbage collector later finds a "still running" child and open pipe
    transports - warning in whatever code happens to run next.
    """
    close_pipes(proc)  # a child that left the group may hold them; the pumps stop reading
    if helpers:
        await asyncio.wait(helpers)  # wait() does not cancel what it waits for
    await let_go(proc)


async def _spawn(argv: list[str], cwd: Path, env: dict[str, str]) -> asyncio.subprocess.Process:
    """Start `argv` in a session of its own, both pipes to T25.

    A cancellation that lands while the child starts lets the start finish, then kills and
    reaps the child before it goes on: asyncio alone would kill only the leader, and leave
    it unreaped if cancelled once more while waiting for it.
    """
    starting = asyncio.ensure_future(
        asyncio.create_subprocess_exec(
            *argv,
            cwd=cwd,
            env=env,
            stdin=asyncio.subprocess.DEVNULL,
            stdout=asyncio.subprocess.PIPE,
            stderr=asyncio.subprocess.PIPE,
            start_new_session=True,
        )
    )

    async def end_it() -> None:
        await asyncio.wait([starting])
        if not starting.cancelled() and starting.exception() is None:
            proc = starting.result()
            if proc.returncode is None:
                _signal_group(proc.pid, signal.SIGKILL)
            await _let_go(proc)

    try:
        return await asyncio.shield(starting)
    except asyncio.CancelledError:
        await unstoppable(end_it)
        raise


async def run_process(
    argv: list[str],
    *,
    cwd: Path,
    env: dict[str, str],
    timeout_s: float,
    abort: asyncio.Event,
    on_output: OutputCallback | None = None,
    grace_s: float = 2.0,
    log_limit: int = DEFAULT_LOG_LIMIT,
    parse_limit: int = PARSE_LIMIT,
    tag: str | None = None,
    namespaced: bool = False,
    redactor: Redactor | None = None,
    log_to: Path | None = None,
) -> ProcessResult:
    """Run `argv` to its end, its timeout, or `abort`; never raises for the child's behaviour.

    What it prints is redacted of `redactor`'s secrets (by default, those T25 holds) before it
    reaches `on_output` or the result. The log keeps its first `log_limit` bytes: in the
    result's `log`, or, given `log_to`, written to that file (`log_file`), which the caller
    removes once it is done with it (`run_process` removes it when it raises). stdout and
    stderr, for reading the result, their first and last `parse_limit / 2`.

    If the calling task is cancelled, the group is killed and the leader reaped before the
    cancellation propagates. With a `tag` (an agent's or a QA check's run), whatever still
    carries the tag when the run ends is killed too (`adapters.containment`) — unless the run
    is `namespaced` (a PID namespace that ends with its first process, as bubblewrap's does)
    and ended by itself: then nothing of it is left, and /proc is not searched.
    """
    redactor = Redactor.of_held() if redactor is None else redactor
    printed = _Output(log_limit, parse_limit, log_to)
    if tag is None:
        return await _run(argv, cwd, env, timeout_s, abort, on_output, grace_s, printed, redactor)
    done: ProcessResult | None = None
    try:
        done = await _run(
            argv,
            cwd,
            containment.tag_env(env, tag),
            timeout_s,
            abort,
            on_output,
            grace_s,
            printed,
            redactor,
        )
        return done
    finally:
        if not (namespaced and done is not None and _ended_by_itself(done)):
            containment.kill_tagged(tag)


def _ended_by_itself(done: ProcessResult) -> bool:
    """Neither stopped by T25 (its timeout, an abort) nor killed by a signal."""
    return not (done.timed_out or done.aborted or done.spawn_error) and done.signal is None


async def _supervise(
    proc: asyncio.subprocess.Process,
    pumps: list[asyncio.Task[Exception | None]],
    exited: asyncio.Task[None],
    aborting: asyncio.Task[bool],
    timeout_s: float,
    grace_s: float,
) -> tuple[bool, bool]:
    """Wait for the leader to exit, its time to run out or an abort; end the group; drain
    the pipes (bounded); raise what a sink raised. (timed out, aborted)."""
    await asyncio.wait({exited, aborting}, timeout=timeout_s, return_when=asyncio.FIRST_COMPLETED)
    timed_out = aborted = False
    if not exited.done():
        aborted = aborting.done()
        timed_out = not aborted
        await _stop(proc, grace_s)
    # The leader is gone; whatever it left running in its group goes too.
    _signal_group(proc.pid, signal.SIGKILL)
    # The pipes close once every holder is dead. A child that left the group (setsid)
    # could hold them open forever, so draining them is bounded (`_let_go` closes them).
    await asyncio.wait(pumps, timeout=max(grace_s, 1.0))
    for pump in pumps:
        if pump.done() and not pump.cancelled() and (failure := pump.result()):
            raise failure
    return timed_out, aborted


class _Output:
    """What a child prints, as it arrives: each stream's head and tail for reading its
    result, both interleaved from the start for the log, each bounded; and the
    `ProcessResult` it makes once the child has ended."""

    def __init__(
        self, limit: int, parse_limit: int = PARSE_LIMIT, spool: Path | None = None
    ) -> None:
        self.started = time.monotonic()
        parse = min(limit, parse_limit)
        self.out, self.err, self.log = Capped(parse), Capped(parse), LogHead(limit, spool)

    async def ended(self, code: int | None, *, timed_out: bool, aborted: bool) -> ProcessResult:
        """The result of a child that ran: `code` is its leader's return code."""
        killed_by = -code if code is not None and code < 0 else None
        return await self.result(
            exit_code=None if killed_by or timed_out or aborted else code,
            timed_out=timed_out,
            aborted=aborted,
            signal=killed_by,
        )

    def pumps(
        self,
        proc: asyncio.subprocess.Process,
        on_output: OutputCallback | None,
        redactor: Redactor,
    ) -> list[asyncio.Task[Exception | None]]:
        """A task reading each of the child's pipes to its end."""
        # `_spawn` asks for both pipes, so both are there.
        assert proc.stdout is not None
        assert proc.stderr is not None
        return [
            asyncio.create_task(
                _pump(proc.stdout, "stdout", self.out, self.log, on_output, redactor.stream())
            ),
            asyncio.create_task(
                _pump(proc.stderr, "stderr", self.err, self.log, on_output, redactor.stream())
            ),
        ]

    async def result(self, exit_code: int | None, **how: Any) -> ProcessResult:
        spooled = self.log.spool is not None
        return ProcessResult(
            exit_code=exit_code,
            stdout=self.out.value(),
            stderr=self.err.value(),
            log=b"" if spooled else await self.log.value(),
            log_file=await self.log.spooled() if spooled else None,
            tail=self.log.tail,
            duration_s=time.monotonic() - self.started,
            **how,
        )


async def _run(
    argv: list[str],
    cwd: Path,
    env: dict[str, str],
    timeout_s: float,
    abort: asyncio.Event,
    on_output: OutputCallback | None,
    grace_s: float,
    printed: _Output,
    redactor: Redactor,
) -> ProcessResult:
    try:
        if abort.is_set():
            return await printed.result(exit_code=None, aborted=True)
        try:
            proc = await _spawn(argv, cwd, env)
        except (OSError, ValueError) as exc:  # ValueError: a NUL byte in an argument
            return await printed.result(exit_code=None, spawn_error=_spawn_error(exc, argv, cwd))
        pumps = printed.pumps(proc, on_output, redactor)
        exited = asyncio.create_task(_exit(proc))
        aborting = asyncio.create_task(abort.wait())
        try:
            timed_out, aborted = await _supervise(proc, pumps, exited, aborting, timeout_s, grace_s)
        except BaseException:
            _signal_group(proc.pid, signal.SIGKILL)
            raise
        finally:
            helpers = (*pumps, exited, aborting)
            for task in helpers:
                task.cancel()
            await unstoppable(lambda: _let_go(proc, helpers))

        return await printed.ended(proc.returncode, timed_out=timed_out, aborted=aborted)
    except BaseException:
        printed.log.discard()  # no result: nobody will remove its spool
        raise
    finally:
        printed.log.close()  # its file, if it spilled to one
