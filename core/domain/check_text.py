"""Failing checks as a person reads them, where a decision is made on them.

A check's output is kept as its tail (`CheckResult.excerpt`); shown raw it is one line of
escaped text, or a JSON string with `\\n` in it. Here each failed check becomes its name,
its exit code, and the last lines of what it printed, each a line of its own, made
`printable` so stored output never reaches a terminal as control sequences. The cockpit's
question dialog, retry question and detail, and `t25 task show`, all use it.
"""

from __future__ import annotations

from collections.abc import Iterable

from core.domain.models import CheckResult
from core.domain.text import printable

LAST_LINES = 8  # of each failing check's output: enough for an assertion and its location


def failing_checks(checks: Iterable[CheckResult], *, last_lines: int = LAST_LINES) -> list[str]:
    """Each failed check, then the last lines of its output indented under it; [] when none
    failed."""
    out: list[str] = []
    for check in checks:
        if check.passed:
            continue
        code = "" if check.exit_code is None else f" (exit {check.exit_code})"
        kind = "" if check.required else ", optional"
        out.append(f"✗ {printable(check.name)}{code}{kind}")
        if check.start_error:
            out.append(f"    could not start: {printable(check.start_error)}")
        lines = [line.rstrip() for line in check.excerpt.splitlines() if line.strip()]
        out.extend(f"    {printable(line)}" for line in lines[-last_lines:])
    return out


def failure_lines(error: str | None, checks: Iterable[CheckResult] = ()) -> list[str]:
    """Why a task stopped, for the question that retries it: its error, each of its own
    lines, then any failing checks."""
    out = [f"error: {printable(line)}" for line in (error or "").splitlines()[:1]]
    out += [f"       {printable(line)}" for line in (error or "").splitlines()[1:]]
    return out + failing_checks(checks)
