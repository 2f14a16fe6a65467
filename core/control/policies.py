"""The policies code applies between stages, each a small pure function.

An agent's output is only data: whether a diff is too big, whether a plan waits for a
human, whether a review approves, whether QA passed, whether a loop may run again and
whether a human may merge are all decided here, from facts and `t25.yaml`, never from
the model's word. Nothing in this module reads a file, a clock or the store, so every
decision can be tested at its exact boundary and replayed from the audit trail.

    check_diff_limits(stat, limits)        -> reason the change is too big, or None
    check_dependency_budget(added, limits) -> reason the change adds too many dependencies
    protected_touched(paths, patterns)     -> the changed paths policies.protected_paths names
    guarded(stat, policy)                  -> those, and the tests the change takes away
    beyond_documentation(paths, policy)    -> what a DOCS commit changed beyond docs_paths
    requires_plan_approval(plan, policy)   -> does the plan wait for a human?
    evaluate_review(findings)              -> ReviewVerdict (from severities only)
    evaluate_qa(results)                   -> QAVerdict (required checks only)
    may_loop_again(loops_so_far, bound)    -> may QA/REVIEW send back once more?
    foreign_completion(chain, role, ...)   -> why a completion does not fit its run's role
    merge_refusal(task, ...)               -> why a human merge is refused, or None
    unnamed_protected(task, allowed)       -> protected paths a merge has not named
"""

from __future__ import annotations

import functools
import re
from collections import Counter
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass

from core.config.policy_config import ApprovalPolicy, Policies
from core.config.schema import AgentProfile, Limits
from core.domain.answers import SEVERITIES, Finding, PlanAnswer
from core.domain.check_start import ENVIRONMENT_ERROR, unstarted, unstarted_line
from core.domain.models import CheckResult, DiffStat, Task, TaskState
from core.domain.text import printable

DEFAULT_BLOCKING: frozenset[str] = frozenset({"blocker", "major"})


# -- after implementation ------------------------------------------------------------------


def check_diff_limits(stat: DiffStat, limits: Limits) -> str | None:
    """None when the change stays within its limits - files, lines, the bytes of one file
    (equal to a limit is within it); otherwise one line naming every limit exceeded, with
    the numbers."""
    over = []
    files = len(stat.files)
    if files > limits.max_files_changed:
        over.append(f"{_n(files, 'file')} (limit {limits.max_files_changed:,})")
    if stat.lines > limits.max_diff_lines:
        over.append(f"{_n(stat.lines, 'line')} (limit {limits.max_diff_lines:,})")
    if stat.largest_bytes > limits.max_file_bytes:
        over.append(
            f"a file of {stat.largest_bytes:,} bytes, {printable(stat.largest)} "
            f"(limits.max_file_bytes {limits.max_file_bytes:,})"
        )
    return f"the change touches {' and '.join(over)}" if over else None


def check_dependency_budget(added: Sequence[str], limits: Limits) -> str | None:
    """None when the change adds no more dependencies than `limits.max_new_dependencies`
    (None: no budget); otherwise one line with the number, the budget and the names."""
    budget = limits.max_new_dependencies
    if budget is None or len(added) <= budget:
        return None
    count = f"{len(added):,} {'dependency' if len(added) == 1 else 'dependencies'}"
    return f"the change adds {count} (limit {budget:,}): {', '.join(added)}"


# -- protected paths ---------------------------------------------------------------------------


def protected_touched(paths: Iterable[str], patterns: Sequence[str]) -> tuple[str, ...]:
    """The paths (sorted, each once) that one of `patterns` names.

    Patterns are gitignore-style: one without a slash names a file or directory at any
    depth (`package.json`, `requirements*.txt`); one with a slash is anchored at the
    repository's root (`.github/workflows/**`); `*` and `?` stay within a path segment
    and `**` spans segments. A pattern naming a directory covers everything beneath it.
    """
    matchers = [_matcher(pattern) for pattern in patterns]
    return tuple(sorted({p for p in paths if any(m(p) for m in matchers)}))


def guarded(stat: DiffStat, policy: Policies) -> tuple[str, ...]:
    """The paths (sorted, each once) of a change that an approver names at merge: those a
    protected pattern names, and the tests it takes away (deleted, or renamed away, under
    `policies.test_paths`)."""
    protected = protected_touched(stat.touched, policy.protected)
    return tuple(sorted({*protected, *protected_touched(stat.gone, policy.test_paths)}))


def beyond_documentation(paths: Iterable[str], policy: Policies) -> tuple[str, ...]:
    """The paths (sorted, each once) a DOCS commit changed that are not documentation:
    named by no `docs_paths` pattern, or protected."""
    paths = tuple(paths)
    docs = set(protected_touched(paths, policy.docs_paths))
    protected = set(protected_touched(paths, policy.protected))
    return tuple(sorted({p for p in paths if p not in docs or p in protected}))


def unnamed_protected(task: Task, allowed: Iterable[str]) -> tuple[str, ...]:
    """The protected paths the task touches that a merge decision did not name."""
    named = set(allowed)  # a path with a control character may be named as it is shown
    return tuple(p for p in task.protected_paths if p not in named and printable(p) not in named)


@functools.lru_cache(maxsize=256)
def _matcher(pattern: str) -> Callable[[str], re.Match[str] | None]:
    anchored = "/" in pattern.rstrip("/")
    body = pattern.strip("/")
    regex = _glob(body)
    if not anchored:
        regex = "(?:.*/)?" + regex
    return re.compile(regex + "(?:/.*)?", re.DOTALL).fullmatch


def _glob(pattern: str) -> str:
    out, i = [], 0
    while i < len(pattern):
        if pattern.startswith("**/", i):
            out.append("(?:.*/)?")
            i += 3
        elif pattern.startswith("**", i):
            out.append(".*")
            i += 2
        elif pattern[i] == "*":
            out.append("[^/]*")
            i += 1
        elif pattern[i] == "?":
            out.append("[^/]")
            i += 1
        else:
            out.append(re.escape(pattern[i]))
            i += 1
    return "".join(out)


# -- the approval gate ---------------------------------------------------------------------


def requires_plan_approval(plan: PlanAnswer, policy: ApprovalPolicy) -> bool:
    """Whether the plan waits in AWAITING_APPROVAL: its risk is one the policy names."""
    return policy.requires_approval(plan.risk)


# -- review ----------------------------------------------------------------------------------


@dataclass(frozen=True)
class ReviewVerdict:
    """What T25 decides from a review's findings. `blocking` are the findings that
    must be fixed before the change may go on; `summary` is one line for people."""

    approve: bool
    blocking: tuple[Finding, ...]
    summary: str


def evaluate_review(
    findings: Sequence[Finding], *, blocking: frozenset[str] = DEFAULT_BLOCKING
) -> ReviewVerdict:
    """Approve iff no finding has a blocking severity. The reviewer's own `verdict`
    field is deliberately not an input: a model saying APPROVE next to a major
    finding does not approve anything."""
    unknown = set(blocking) - set(SEVERITIES)
    if unknown:
        raise ValueError(f"unknown severities {sorted(unknown)} (known: {', '.join(SEVERITIES)})")
    stopping = tuple(f for f in findings if f.severity in blocking)
    counts = Counter(f.severity for f in findings)
    tally = ", ".join(f"{counts[s]} {s}" for s in SEVERITIES if counts[s]) or "no findings"
    head = "changes requested" if stopping else "approve"
    return ReviewVerdict(approve=not stopping, blocking=stopping, summary=f"{head}: {tally}")


# -- QA ----------------------------------------------------------------------------------------


@dataclass(frozen=True)
class QAVerdict:
    """What T25 decides from the checks it ran itself. Only a failed *required* check
    fails QA; a failed optional one is reported in `optional_failures` and the summary."""

    passed: bool
    failures: tuple[CheckResult, ...]
    optional_failures: tuple[CheckResult, ...]
    summary: str
    # Required checks that could not start (core.domain.check_start): the environment's
    # fault, not the change's - the task waits for the operator instead of going back to dev.
    unstarted: tuple[CheckResult, ...] = ()


def evaluate_qa(results: Sequence[CheckResult]) -> QAVerdict:
    """Passed iff every required check passed; no checks configured is a pass. A required
    check that could not start makes it an environment error (`unstarted`)."""
    if not results:
        return QAVerdict(True, (), (), "no QA checks configured")
    failures = tuple(r for r in results if r.required and not r.passed)
    optional = tuple(r for r in results if not r.required and not r.passed)
    stuck = unstarted(results)
    if stuck:
        summary = f"{unstarted_line(stuck)} ({ENVIRONMENT_ERROR})"
        return QAVerdict(False, failures, optional, summary, stuck)
    return QAVerdict(not failures, failures, optional, _qa_summary(results, failures, optional))


def _qa_summary(
    results: Sequence[CheckResult],
    failures: Sequence[CheckResult],
    optional: Sequence[CheckResult],
) -> str:
    ok = sum(r.passed for r in results)
    if failures:
        return (
            f"required {_n(len(failures), 'check')} failed: "
            f"{_names(failures)} ({ok} of {len(results)} passed)"
        )
    if optional:
        return f"{ok} of {len(results)} checks passed; optional failed: {_names(optional)}"
    return f"all {_n(len(results), 'check')} passed"


# -- loops -------------------------------------------------------------------------------------


def may_loop_again(loops_so_far: int, bound: int) -> bool:
    """Whether QA or REVIEW may send the task back to IMPLEMENTING once more.

    `bound` is `limits.max_qa_loops` / `limits.max_review_loops`: the number of send-backs
    allowed. When this says no, the task goes to NEEDS_INPUT for a human instead of
    looping forever on an agent that cannot converge.
    """
    return loops_so_far < bound


# -- the human merge ---------------------------------------------------------------------------


def foreign_completion(
    chain: Sequence[AgentProfile], role: str, adapter: str, model: str | None
) -> str | None:
    """Why a completion's claim does not fit the run it was leased for - an adapter the
    role's chain does not hold, or a model none of that adapter's profiles names - or None.
    A CLI reports its model as it knows it (`claude-sonnet-4-5-20250929` for a profile's
    `claude-sonnet-4-5`): either name may extend the other."""
    profiles = [p for p in chain if p.adapter == adapter]
    if not profiles:
        held = ", ".join(dict.fromkeys(p.adapter for p in chain)) or "none"
        return (
            f"the completion names adapter {adapter!r}, which {role}'s chain does not hold ({held})"
        )
    if model is None or any(p.model is None for p in profiles):
        return None
    named = [p.model for p in profiles if p.model]
    if any(model.startswith(m) or m.startswith(model) for m in named):
        return None
    return f"the completion names model {model!r}, which no {adapter} profile of {role} names ({', '.join(named)})"


def merge_refusal(
    task: Task, *, checks_passed: bool | None, review_approved: bool | None
) -> str | None:
    """None when a human may merge the task; otherwise the reason, one line.

    A merge needs: DONE, not yet merged, not archived, required checks passed and a
    review verdict (decided by `evaluate_review`) of approve. `None` for either fact
    means it was never decided, which is not a pass.
    """
    if task.merged:
        return f"{task.id} is already merged"
    if task.archived:
        return f"{task.id} is archived"
    if task.state != TaskState.DONE:
        return f"{task.id} is in {task.state}; a merge needs {TaskState.DONE}"
    if checks_passed is not True:
        return "its required checks have not passed"
    if review_approved is not True:
        return "its review verdict is not approve"
    return None


def _n(count: int, noun: str) -> str:
    return f"{count:,} {noun}{'' if count == 1 else 's'}"


def _names(results: Sequence[CheckResult]) -> str:
    return ", ".join(r.name for r in results)
