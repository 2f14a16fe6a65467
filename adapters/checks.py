"""QA checks T25 runs itself in a task's worktree (`qa.checks` in t25.yaml).

A check is a command, not an agent, but it is just as untrusted: a test suite can hang or
flood its output. So it runs under the same supervision as an agent (`run_process`), with
the same minimal environment and a private HOME of its own (tools cache there), in the same
sandbox as the agents (it runs the code they wrote), and its outcome is a `CheckResult` -
never an exception. A sandbox that cannot be had fails the check rather than running it
unconfined; that, and a program that could not start, is said in `start_error` (an
environment error, adapters.check_start), apart from a check that ran and failed. Under bubblewrap the check sees the task's tree at the main checkout's path
(`qa.tree_at`, adapters.checkout_view), so the checkout's virtual environment imports the
change. Where T25 knows the check's test runner, its result carries the runner's figures
(adapters.figures).
"""

from __future__ import annotations

import asyncio
from pathlib import Path

from adapters.caps import capped
from adapters.check_start import start_failure
from adapters.checkout_view import CheckoutView, unseen
from adapters.containment import run_tag
from adapters.figures import Before, before, junit_path, junit_report, names_pytest, pytest_summary
from adapters.homes import home_variables, private_home, run_homes, seen_at_checkout
from adapters.netproxy import RunProxy, run_network
from adapters.process import ProcessResult, minimal_env, run_process
from adapters.sandbox import Bubblewrap, Confinement, Sandbox, SandboxUnavailable, sandbox_for
from core.config.policy_config import QACheck
from core.domain.agent import CheckSandbox
from core.domain.figures import Figures
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
    report = junit_path(check)
    noted = before(cwd, report) if report is not None else None
    with (
        private_home(True, {}) as home,
        seen_at_checkout(cwd, sandbox, confine.at_checkout, confine.hidden) as view,
    ):
        assert home is not None  # asked for
        env = minimal_env({**CHECK_ENV, **home_variables(home)})
        box = Confinement(
            worktree=cwd,
            home=home,
            hidden=(*confine.hidden, run_homes()),
            network=sandbox.network(confine.network),
            read_paths=confine.read_paths,
            view=view,
        )
        done, over, proxy = await _run(check, box, sandbox, env, confine, abort)
    excerpt = _what_happened(done, over, proxy, check, cwd, sandbox.name, view, confine)
    passed = done.exit_code == 0 and over is None
    return CheckResult(
        name=check.name,
        required=check.required,
        passed=passed,
        exit_code=done.exit_code,
        excerpt=excerpt,
        duration_s=done.duration_s,
        figures=_figures(check, done, noted),
        start_error=None if passed else start_failure(done, check.run[0], sandbox.name),
        confined=isinstance(sandbox, Bubblewrap),
    )


def _what_happened(
    done: ProcessResult,
    over: str | None,
    proxy: RunProxy | None,
    check: QACheck,
    cwd: Path,
    sandbox: str,
    view: CheckoutView | None,
    confine: CheckSandbox,
) -> str:
    """The check's excerpt: its output's tail, with T25's notes on what ended or hid it."""
    excerpt = _excerpt(done.tail)  # the log keeps the head; a failure's summary is last
    if over is not None:
        excerpt += f"\n[t25: {over}; the check's processes were killed]"
    denied = [c for c in (proxy.records if proxy else []) if not c.allowed]
    if denied:  # what the check tried to reach and was refused, for whoever reads why it failed
        excerpt += "".join(f"\n[t25: {c.line()}]" for c in denied[-5:])
    if confine.at_checkout and view is None and (why := unseen(cwd, sandbox)):
        excerpt += f"\n[t25: {why}]"
    if done.spawn_error:
        excerpt = done.spawn_error
    elif done.timed_out:
        excerpt += f"\n[t25: timed out after {check.timeout_s} s; process group killed]"
    elif done.aborted:
        excerpt += "\n[t25: stopped by T25; process group killed]"
    return excerpt


def _figures(check: QACheck, done: ProcessResult, noted: Before | None) -> Figures | None:
    """What the check's runner reported: its JUnit XML report (removed once read), else
    pytest's summary line; None for a runner T25 does not know. The XML report cannot hold
    the deselected tests, so those come from the summary line."""
    xml = junit_report(noted) if noted is not None else None
    line = pytest_summary(done.tail.decode("utf-8", "replace")) if names_pytest(check.run) else None
    if xml is not None and line is not None:
        return xml.model_copy(update={"deselected": line.deselected})
    return xml or line


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
            namespaced=sandbox.ends_its_processes,
        )
        return done, run.hit(done.exit_code, done.signal), proxy
