"""One generic adapter for every agent CLI; what differs between CLIs is a small spec.

A `CliAdapterSpec` says only what is particular to one CLI: its binary, its arguments, how to
read its output, how it reports an exhausted quota. `CliAdapter` does the rest once for all of
them: finding the binary and its version, passing big prompts through a private temp file,
giving the child a minimal environment, supervising the process (`adapters.process`) and
turning whatever happened into an `AgentResult` - without ever raising for the agent's sake.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import re
import shutil
import tempfile
from collections.abc import Iterator
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path

from core.agent import AgentRequest, AgentResult, Failure, OutputSink
from core.models import Usage
from adapters.process import ProcessResult, minimal_env, run_process

# Above this many bytes a prompt goes through a file: one argv element is limited to 128 KiB
# on Linux, and a long argv is visible to every user in `ps`.
PROMPT_FILE_THRESHOLD = 100_000
VERSION_TIMEOUT_S = 10.0
_VERSION = re.compile(r"\bv?(\d+\.\d+(?:\.\d+)?(?:[-+.][0-9A-Za-z.]+)?)")


@dataclass(frozen=True)
class PromptArg:
    """The prompt as the CLI receives it: inline `text`, or the `path` of a file holding it."""

    text: str | None = None
    path: Path | None = None


@dataclass(frozen=True)
class ParsedOutput:
    """What a spec reads from a CLI's stdout. `error` is an error the CLI itself reported."""

    final_text: str = ""
    usage: Usage = Usage()
    error: str | None = None
    is_error: bool = False
    files_changed: tuple[str, ...] = ()


@dataclass(frozen=True)
class QuotaSignal:
    """The CLI's quota or rate limit is exhausted; the factory moves to the next adapter."""

    message: str
    resets_at: datetime | None = None


class CliAdapterSpec:
    """What is particular to one agent CLI. Subclass it; override what differs."""

    name: str
    binary: str
    version_args: tuple[str, ...] = ("--version",)

    def build_argv(self, request: AgentRequest, prompt: PromptArg) -> list[str]:
        """The arguments after the binary (the adapter puts the located binary first).
        Pass the prompt so it cannot be read as an option: after `--`, or as an option's value."""
        raise NotImplementedError

    def parse(self, stdout: str) -> ParsedOutput:
        raise NotImplementedError

    def detect_quota(self, stdout: str, stderr: str, exit_code: int | None) -> QuotaSignal | None:
        return None

    def extra_env(self, request: AgentRequest) -> dict[str, str]:
        """Variables this CLI needs on top of the minimal environment (base URLs, config dirs)."""
        return {}

    def locate(self) -> str | None:
        return shutil.which(self.binary)


@contextlib.contextmanager
def prompt_arg(prompt: str, cwd: Path) -> Iterator[PromptArg]:
    """Small prompts go inline; big ones through a 0600 temp file outside the worktree,
    removed afterwards whatever happens (an agent could otherwise commit it)."""
    if len(prompt.encode()) <= PROMPT_FILE_THRESHOLD:
        yield PromptArg(text=prompt)
        return
    where = Path(tempfile.gettempdir()).resolve()
    if where.is_relative_to(cwd.resolve()):
        where = Path("/tmp")
    fd, name = tempfile.mkstemp(prefix="t25-prompt-", suffix=".md", dir=where)  # mode 0600
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as file:
            file.write(prompt)
        yield PromptArg(path=Path(name))
    finally:
        with contextlib.suppress(FileNotFoundError):
            os.unlink(name)


def _one_line(text: str, limit: int = 300) -> str:
    line = " ".join(text.split())
    return line if len(line) <= limit else line[: limit - 1] + "…"


class CliAdapter:
    """An `AgentAdapter` for any CLI described by a `CliAdapterSpec`."""

    def __init__(self, spec: CliAdapterSpec, *, grace_s: float = 2.0) -> None:
        self.spec = spec
        self.name = spec.name
        self.grace_s = grace_s
        self._version: str | None = None
        self._version_read = False

    def locate(self) -> str | None:
        return self.spec.locate()

    async def version(self) -> str | None:
        if self._version_read:
            return self._version
        path = self.locate()
        if path is None:
            return None  # not cached: it may be installed later
        done = await run_process([path, *self.spec.version_args],
                                 cwd=Path(tempfile.gettempdir()),
                                 env=minimal_env(), timeout_s=VERSION_TIMEOUT_S,
                                 abort=asyncio.Event(), grace_s=0.5, log_limit=65536)
        found = _VERSION.search(done.log.decode("utf-8", "replace"))
        self._version, self._version_read = (found.group(1) if found else None), True
        return self._version

    async def run(self, request: AgentRequest, sink: OutputSink,
                  abort: asyncio.Event) -> AgentResult:
        path = self.locate()
        if path is None:
            return AgentResult(adapter=self.name, model=request.model, failure=Failure.SPAWN,
                               error=f"{self.spec.binary}: not found on PATH")
        version = await self.version()
        with prompt_arg(request.prompt, request.cwd) as prompt:
            argv = [path, *self.spec.build_argv(request, prompt)]
            done = await run_process(argv, cwd=request.cwd,
                                     env=minimal_env(self.spec.extra_env(request)),
                                     timeout_s=request.timeout_s, abort=abort,
                                     on_output=sink, grace_s=self.grace_s)
        return self._result(request, version, done)

    def _parse(self, stdout: str) -> ParsedOutput:
        try:
            return self.spec.parse(stdout)
        except Exception as exc:  # output a parser did not foresee is the agent's doing
            return ParsedOutput(error=f"unreadable output: {exc}", is_error=True)

    def _result(self, request: AgentRequest, version: str | None,
                done: ProcessResult) -> AgentResult:
        stdout = done.stdout.decode("utf-8", "replace")
        stderr = done.stderr.decode("utf-8", "replace")
        parsed = self._parse(stdout)
        base = dict(adapter=self.name, cli_version=version,
                    model=parsed.usage.model or request.model, exit_code=done.exit_code,
                    final_text=parsed.final_text, usage=parsed.usage,
                    files_changed=parsed.files_changed, log=done.log,
                    duration_s=done.duration_s)
        if done.spawn_error:
            return AgentResult(**base, failure=Failure.SPAWN, error=done.spawn_error)
        if done.aborted:
            return AgentResult(**base, failure=Failure.ABORTED,
                               error="aborted by T25; process group killed")
        if done.timed_out:
            return AgentResult(**base, failure=Failure.TIMEOUT,
                               error=f"timed out after {request.timeout_s:g} s; "
                                     "process group killed")
        if quota := self.spec.detect_quota(stdout, stderr, done.exit_code):
            return AgentResult(**base, failure=Failure.QUOTA, error=_one_line(quota.message),
                               quota_resets_at=quota.resets_at)
        if done.exit_code != 0 or parsed.is_error:
            detail = parsed.error or done.stderr_tail
            if done.exit_code == 0:
                status = "reported an error"
            elif done.signal is not None:
                status = f"killed by signal {done.signal}"
            else:
                status = f"exited with status {done.exit_code}"
            error = f"{status}: {detail}" if detail else status
            return AgentResult(**base, failure=Failure.EXIT, error=_one_line(error))
        return AgentResult(**base)
