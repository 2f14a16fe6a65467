"""QA checks T25 runs itself in a task's worktree (`qa.checks` in t25.yaml).

A check is a command, not an agent, but it is just as untrusted: a test suite can hang or
flood its output. So it runs under the same supervision as an agent (`run_process`), with
the same minimal environment and a private HOME of its own (tools cache there), in the same
sandbox as the agents (it runs the code they wrote), and its outcome is a `CheckResult` -
never an exception. A sandbox that cannot be had fails the check rather than running it
unconfined; that, and a program that could not start, is said in `start_error` (an
environment error, adapters.check_start), apart from a check that ran and failed. Under bubblewrap the check sees the task's tree at the main checkout's path
(`qa.tree_at`, adapters.checkout_view), so the checkout's virtual environment imports the
change.
"""

from __future__ import annotations

import asyncio
import contextlib
import tempfile
from collections.abc import Iterator
from pathlib import Path

from adapters.base import home_variables, private_home, run_homes
from adapters.caps import capped
from adapters.check_start import start_failure
from adapters.checkout_view import checkout_view, tidy, unseen
from adapters.containment import run_tag
from adapters.netproxy import RunProxy, run_network
from adapters.process import ProcessResult, minimal_env, run_process
from adapters.sandbox import Bubblewrap, Confinement, Sandbox, SandboxUnavailable, sandbox_for
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
    try:
        sandbox = sandbox_for(confine.kind)
        await sandbox.check()
    except SandboxUnavailable as exc:
        cannot = f"sandbox {confine.kind} cannot be had: {exc}"
        return CheckResult(
            name=check.name,
            required=check.required,
            passed=False,
            excerpt=f"{cannot}; the check is not run",
            start_error=f"the {cannot}",
        )
    with _scratch() as (home, aside):
        view = None
        if confine.at_checkout and isinstance(sandbox, Bubblewrap):
            view = checkout_view(cwd, aside, confine.hidden)
        env = minimal_env({**CHECK_ENV, **home_variables(home)})
        box = Confinement(
            worktree=cwd,
            home=home,
            hidden=(*confine.hidden, run_homes()),
            network=sandbox.network(confine.network),
            read_paths=confine.read_paths,
            view=view,
        )
        try:
            done, over, proxy = await _run(check, box, sandbox, env, confine, abort)
        finally:
            if view is not None:
                tidy(view, cwd)
    excerpt = _excerpt(done.tail)  # the log keeps the head; a failure's summary is last
    if over is not None:
        excerpt += f"\n[t25: {over}; the check's processes were killed]"
    denied = [c for c in (proxy.records if proxy else []) if not c.allowed]
    if denied:  # what the check tried to reach and was refused, for whoever reads why it failed
        excerpt += "".join(f"\n[t25: {c.line()}]" for c in denied[-5:])
    if confine.at_checkout and view is None and (why := unseen(cwd, sandbox.name)):
        excerpt += f"\n[t25: {why}]"
    if done.spawn_error:
        excerpt = done.spawn_error
    elif done.timed_out:
        excerpt += f"\n[t25: timed out after {check.timeout_s} s; process group killed]"
    elif done.aborted:
        excerpt += "\n[t25: stopped by T25; process group killed]"
    passed = done.exit_code == 0 and over is None
    return CheckResult(
        name=check.name,
        required=check.required,
        passed=passed,
        exit_code=done.exit_code,
        excerpt=excerpt,
        duration_s=done.duration_s,
        start_error=None if passed else start_failure(done, check.run[0], sandbox.name),
    )


async def _run(
    check: QACheck,
    box: Confinement,
    sandbox: Sandbox,
    env: dict[str, str],
    confine: CheckSandbox,
    abort: asyncio.Event | None,
) -> tuple[ProcessResult, str | None, RunProxy | None]:
    """The check's process, confined and capped: how it ended, the cap it hit, its proxy."""
    tag = run_tag(f"{confine.run_id}/{check.name}")
    async with (
        run_network(box, Allowlist.of(confine.allow_hosts)) as (box, proxy),
        capped(sandbox.wrap(list(check.run), box, env), confine.caps, tag) as run,
    ):
        done = await run_process(
            run.argv,
            cwd=box.worktree,
            env=env,
            timeout_s=check.timeout_s,
            abort=abort or asyncio.Event(),
            tag=tag,
        )
        return done, run.hit(done.exit_code, done.signal), proxy


@contextlib.contextmanager
def _scratch() -> Iterator[tuple[Path, Path]]:
    """A check's private HOME, and a folder beside it for its view's files: both out of
    every other run's sight, both removed afterwards."""
    with (
        private_home(True, {}) as home,
        tempfile.TemporaryDirectory(prefix="view-", dir=run_homes()) as aside,
    ):
        assert home is not None  # asked for
        yield home, Path(aside)
