"""A QA check that could not start: an environment error, never the change's.

A check whose program is missing where the checks run, or that the sandbox refused, says
nothing about the code: sending the task back to dev would spend a loop on an agent that
cannot install a program, and a merge refused "for the code" would blame the wrong thing.
So QA waits for the operator instead (NEEDS_INPUT: fix the environment, answer, and QA runs
again), and the merge is refused naming the program.

    unstarted(checks)      the required checks that could not start
    unstarted_line(checks) "QA check 'lint' could not start: program 'ruff' not found"
"""

from __future__ import annotations

from collections.abc import Sequence

from core.domain.models import CheckResult
from core.domain.text import printable

ENVIRONMENT_ERROR = "environment error; the change was not sent back to dev"

# Where a sandboxed check finds programs, said where it could not find one.
WHERE_CHECKS_RUN = (
    "install it where the checks run (a sandboxed check sees the host's programs read-only and "
    "the homes hidden: `sandbox.read_paths` gives a directory back), or correct `qa.checks` "
    "in t25.yaml"
)


def unstarted(checks: Sequence[CheckResult]) -> tuple[CheckResult, ...]:
    """The required checks that could not start; an optional one only counts as failed."""
    return tuple(c for c in checks if c.required and c.start_error)


def unstarted_line(checks: Sequence[CheckResult]) -> str:
    """Each check that could not start and why, on one line."""
    return "; ".join(
        f"QA check '{printable(c.name)}' could not start: {printable(c.start_error or '')}"
        for c in checks
    )
