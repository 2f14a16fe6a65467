"""The state machine: every legal change of a task's state, declared once.

    RECEIVED → SPEC → PLAN → AWAITING_APPROVAL → IMPLEMENTING → QA → REVIEW → PR_OPEN → DOCS → DONE
    escapes: NEEDS_INPUT · FAILED · CANCELLED      loop: QA and REVIEW can send back to IMPLEMENTING,
    and so can PR_OPEN (the pull request's CI failed, or its reviewers requested changes)
    recheck: an operator sends a DONE task that is not merged back to QA (its branch as it is now)
    reset: an operator sends a task back to a stage it passed (`assert_reset`), its branch
           moved back to where that stage began
    DOCS → QA: a documentation change that touches more than documentation is checked and reviewed

PLAN goes straight to IMPLEMENTING when the plan needs no approval; a rejected plan goes
back to PLAN. NEEDS_INPUT returns to the stage that asked, and a retried FAILED task to
the stage that failed: the table allows any working stage, and `assert_transition` checks
it is the one recorded on the task (`resume_state`).

Nothing here writes; `core.control.service.ControlPlane.transition` is the one function that does.
"""

from __future__ import annotations

from core.domain.models import TaskState as S
from core.errors import IllegalTransition

# The stages where an agent (or T25 itself) is working on the task.
WORKING: tuple[S, ...] = (S.SPEC, S.PLAN, S.IMPLEMENTING, S.QA, S.REVIEW, S.PR_OPEN, S.DOCS)
TERMINAL: frozenset[S] = frozenset({S.DONE, S.CANCELLED})

# The role whose run works each stage; PR_OPEN is done by T25 itself (no agent).
STAGE_ROLE: dict[S, str] = {
    S.SPEC: "spec",
    S.PLAN: "planner",
    S.IMPLEMENTING: "dev",
    S.QA: "qa",
    S.REVIEW: "reviewer",
    S.PR_OPEN: "pr",
    S.DOCS: "docs",
}
HUMAN_NEEDED: frozenset[S] = frozenset({S.AWAITING_APPROVAL, S.NEEDS_INPUT})

_ESCAPES = {S.NEEDS_INPUT, S.FAILED, S.CANCELLED}

TRANSITIONS: dict[S, frozenset[S]] = {
    S.RECEIVED: frozenset({S.SPEC, S.FAILED, S.CANCELLED}),
    S.SPEC: frozenset({S.PLAN, *_ESCAPES}),
    S.PLAN: frozenset({S.AWAITING_APPROVAL, S.IMPLEMENTING, *_ESCAPES}),
    S.AWAITING_APPROVAL: frozenset({S.IMPLEMENTING, S.PLAN, S.FAILED, S.CANCELLED}),
    S.IMPLEMENTING: frozenset({S.QA, *_ESCAPES}),
    S.QA: frozenset({S.REVIEW, S.IMPLEMENTING, *_ESCAPES}),
    S.REVIEW: frozenset({S.PR_OPEN, S.IMPLEMENTING, *_ESCAPES}),
    # IMPLEMENTING: the pull request's CI failed, or its reviewers requested changes.
    S.PR_OPEN: frozenset({S.DOCS, S.IMPLEMENTING, *_ESCAPES}),
    S.DOCS: frozenset({S.DONE, S.QA, *_ESCAPES}),  # QA: a docs change beyond documentation
    S.DONE: frozenset({S.QA}),  # `t25 recheck`: QA and REVIEW again before a merge
    S.NEEDS_INPUT: frozenset({*WORKING, S.FAILED, S.CANCELLED}),
    S.FAILED: frozenset({*WORKING, S.CANCELLED}),
    S.CANCELLED: frozenset(),
}

# The pipeline's order, for a reset (`t25 reset ID --to STAGE`): back to a working stage the
# task is in or has passed. A task waiting on a human or failed stands where it left off.
_ORDER: dict[S, float] = {
    S.SPEC: 1,
    S.PLAN: 2,
    S.AWAITING_APPROVAL: 2.5,
    S.IMPLEMENTING: 3,
    S.QA: 4,
    S.REVIEW: 5,
    S.PR_OPEN: 6,
    S.DOCS: 7,
    S.DONE: 8,
}

# Sources whose way back into the pipeline is fixed by the task's `resume_state`.
_RESUMING = {S.NEEDS_INPUT, S.FAILED}


def assert_transition(current: S, target: S, *, resume_state: S | None = None) -> None:
    """Raise IllegalTransition unless `current → target` is legal.

    From NEEDS_INPUT or FAILED back into a working stage, the target must be the task's
    `resume_state` — the stage that asked for input, or the one that failed.
    """
    if target not in TRANSITIONS[current]:
        legal = ", ".join(sorted(TRANSITIONS[current])) or "none: it is final"
        raise IllegalTransition(
            f"a task in {current} cannot move to {target} (from {current}: {legal})"
        )
    if current in _RESUMING and target in WORKING and target != resume_state:
        expected = resume_state or "no recorded stage"
        raise IllegalTransition(
            f"a task in {current} returns only to the stage it left ({expected}), not {target}"
        )


def assert_reset(current: S, target: S, *, resume_state: S | None = None) -> None:
    """Raise IllegalTransition unless a reset may take a task in `current` back to `target`:
    a working stage at or before where the task stands (for NEEDS_INPUT or FAILED, the
    stage it left)."""
    where = resume_state if current in _RESUMING else current
    if target not in WORKING:
        stages = ", ".join(WORKING)
        raise IllegalTransition(f"a reset goes back to a working stage ({stages}), not {target}")
    if where is None or where not in _ORDER:
        raise IllegalTransition(f"a task in {current} cannot be reset")
    if _ORDER[target] > _ORDER[where]:
        raise IllegalTransition(
            f"a reset goes back, not forward: the task stands at {where}, before {target}"
        )
