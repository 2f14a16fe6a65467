"""QA checks T25 runs itself in a task's worktree (`qa.checks` in t25.yaml).

A check is a command, not an agent, but it is just as untrusted: a test suite can hang or
flood its output. So it runs under the same supervision as an agent (`run_process`), with
the same minimal environment, in the same sandbox as the agents (it runs the code they
wrote), and its outcome is a `CheckResult` - never an exception. A sandbox that cannot be had
fails the check rather than running it unconfined.
"""

from __future__ import annotations

import asyncio
from pathlib import Path

from adapters.base import run_homes
from adapters.caps import capped
from adapters.containment import run_tag
from adapters.netproxy import run_network
from adapters.process import minimal_env, run_process
from adapters.sandbox import Confinement, SandboxUnavailable, sandbox_for
from core.config.schema import QACheck
from core.domain.agent import CheckSandbox
from core.domain.models import CheckResult
from core.domain.network import Allowlist

# Checks must not litter the worktree: a tree with untracked or ignored files is never
# cleaned up, so keep Python's bytecode caches out of it.
CHECK_ENV = {"PYTHONDONTWRITEBYTECODE": "1"}

EXCERPT_BYTES = 4096


def _excerpt(log: bytes) -> str:
    tail = log[-EXCERPT_BYTES:]
    while tail and 0x80 <= tail[0] < 0xC0:  # do not start inside a multi-byte character
        tail = tail[1:]
    return tail.decode("utf-8", "replace")


async def run_check(
    check: QACheck,
    cwd: Path,
    abort: asyncio.Event | None = None,
    confine: CheckSandbox | None = None,
) -> CheckResult:
    """Run one check to its end or its timeout; it passes when it exits 0."""
    confine = confine or CheckSandbox()
    env = minimal_env(CHECK_ENV)
    try:
        sandbox = sandbox_for(confine.kind)
        await sandbox.check()
    except SandboxUnavailable as exc:
        return CheckResult(
            name=check.name,
            required=check.required,
            passed=False,
            excerpt=f"sandbox {confine.kind} cannot be had: {exc}; the check is not run",
        )
    box = Confinement(
        worktree=cwd,
        hidden=(*confine.hidden, run_homes()),
        network=sandbox.network(confine.network),
        read_paths=confine.read_paths,
    )
    tag = run_tag(f"{confine.run_id}/{check.name}")
    async with (
        run_network(box, Allowlist.of(confine.allow_hosts)) as (box, proxy),
        capped(sandbox.wrap(list(check.run), box, env), confine.caps, tag) as run,
    ):
        done = await run_process(
            run.argv,
            cwd=cwd,
            env=env,
            timeout_s=check.timeout_s,
            abort=abort or asyncio.Event(),
            tag=tag,
        )
        over = run.hit(done.exit_code, done.signal)
    excerpt = _excerpt(done.tail)  # the log keeps the head; a failure's summary is last
    if over is not None:
        excerpt += f"\n[t25: {over}; the check's processes were killed]"
    denied = [c for c in (proxy.records if proxy else []) if not c.allowed]
    if denied:  # what the check tried to reach and was refused, for whoever reads why it failed
        excerpt += "".join(f"\n[t25: {c.line()}]" for c in denied[-5:])
    if done.spawn_error:
        excerpt = done.spawn_error
    elif done.timed_out:
        excerpt += f"\n[t25: timed out after {check.timeout_s} s; process group killed]"
    elif done.aborted:
        excerpt += "\n[t25: stopped by T25; process group killed]"
    return CheckResult(
        name=check.name,
        required=check.required,
        passed=done.exit_code == 0 and over is None,
        exit_code=done.exit_code,
        excerpt=excerpt,
        duration_s=done.duration_s,
    )
