"""The state machine table, walked pair by pair."""

import itertools

import pytest

from core.domain.models import TaskState as S
from core.domain.states import TRANSITIONS, WORKING, assert_transition
from core.errors import IllegalTransition

# The seeds' pipeline, written out independently of the table it checks.
HAPPY = [
    S.RECEIVED,
    S.SPEC,
    S.PLAN,
    S.AWAITING_APPROVAL,
    S.IMPLEMENTING,
    S.QA,
    S.REVIEW,
    S.PR_OPEN,
    S.DOCS,
    S.DONE,
]
EXPECTED = {
    *itertools.pairwise(HAPPY),
    (S.PLAN, S.IMPLEMENTING),  # no approval required
    (S.AWAITING_APPROVAL, S.PLAN),  # plan rejected
    (S.QA, S.IMPLEMENTING),
    (S.REVIEW, S.IMPLEMENTING),  # the loops
    (S.PR_OPEN, S.IMPLEMENTING),  # the pull request's CI failed, or changes were requested
    (S.RECEIVED, S.FAILED),
    (S.RECEIVED, S.CANCELLED),
    (S.AWAITING_APPROVAL, S.FAILED),
    (S.AWAITING_APPROVAL, S.CANCELLED),
    *((w, e) for w in WORKING for e in (S.NEEDS_INPUT, S.FAILED, S.CANCELLED)),
    *((S.NEEDS_INPUT, w) for w in WORKING),
    (S.NEEDS_INPUT, S.FAILED),
    (S.NEEDS_INPUT, S.CANCELLED),
    *((S.FAILED, w) for w in WORKING),
    (S.FAILED, S.CANCELLED),
    (S.DONE, S.QA),  # an operator's recheck of a branch that moved since review
    (S.DOCS, S.QA),  # a docs change beyond documentation paths goes through QA and review
}


def test_every_state_is_in_the_table():
    assert set(TRANSITIONS) == set(S)


@pytest.mark.parametrize(("current", "target"), list(itertools.product(S, S)))
def test_every_pair_against_the_table(current, target):
    legal = (current, target) in EXPECTED
    assert (target in TRANSITIONS[current]) == legal
    resume = target if target in WORKING else None
    if legal:
        assert_transition(current, target, resume_state=resume)
    else:
        with pytest.raises(IllegalTransition) as err:
            assert_transition(current, target, resume_state=resume)
        assert str(current) in str(err.value) and str(target) in str(err.value)


@pytest.mark.parametrize("source", [S.NEEDS_INPUT, S.FAILED])
def test_escape_returns_only_to_the_stage_it_left(source):
    assert_transition(source, S.REVIEW, resume_state=S.REVIEW)
    with pytest.raises(IllegalTransition, match="returns only to the stage it left \\(REVIEW\\)"):
        assert_transition(source, S.PLAN, resume_state=S.REVIEW)
    # leaving for CANCELLED needs no recorded stage
    assert_transition(source, S.CANCELLED)


def test_final_states_say_so():
    with pytest.raises(IllegalTransition, match="none: it is final"):
        assert_transition(S.CANCELLED, S.SPEC)
