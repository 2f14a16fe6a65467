"""The board's lanes: the thirteen task states grouped into six, a card marked with its state.

A lane per state needed 260 to 300 columns of terminal; at 120, 160 and 200 columns most of
the tasks waiting for the operator were off to the side. Collapsing the empty lanes was the
other way, and it is not enough: a busy board has tasks in nine states or more, and nine
lanes of readable cards still do not fit 100 columns. Six lanes do, at every width the
board is drawn at (below 100 columns it is one list, `widgets.board.StateList`), so none
scrolls sideways and none can be off screen.

The grouping follows what the operator does, not the pipeline's every step. Each state
that needs the operator keeps a lane of its own (a plan to approve, a question to answer,
a failure to look at), DONE's lane lists the tasks ready to merge first, and the states
where agents work share one lane, each card carrying its state as a chip (`qa`, `review`).
An empty lane shrinks to its header, leaving the room to lanes that have cards.

No Textual here: the board widget draws these, tests read them directly.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass

from core.domain.models import TaskState
from t25_tui.tui.cards import Card

S = TaskState


@dataclass(frozen=True)
class Lane:
    """A column of the board: the states it holds, and whether they wait for the operator."""

    key: str  # its widget's id: `col-<key>`
    title: str
    states: tuple[TaskState, ...]
    needs_you: bool = False

    @property
    def chips(self) -> bool:
        """Whether its cards name their state (it holds more than one)."""
        return len(self.states) > 1


LANES: tuple[Lane, ...] = (
    Lane("RECEIVED", "RECEIVED", (S.RECEIVED,)),
    Lane("WORKING", "WORKING", (S.SPEC, S.PLAN, S.IMPLEMENTING, S.QA, S.REVIEW, S.PR_OPEN, S.DOCS)),
    Lane("AWAITING_APPROVAL", "APPROVE", (S.AWAITING_APPROVAL,), needs_you=True),
    Lane("NEEDS_INPUT", "NEEDS INPUT", (S.NEEDS_INPUT,), needs_you=True),
    Lane("FAILED", "FAILED", (S.FAILED,), needs_you=True),
    Lane("DONE", "DONE", (S.DONE, S.CANCELLED), needs_you=True),  # unmerged: ready to merge
)
LANE_OF: dict[TaskState, Lane] = {state: lane for lane in LANES for state in lane.states}
# A card's state chip, short: a lane is about 16 columns wide at 100 columns of terminal.
CHIP: dict[TaskState, str] = {
    S.SPEC: "spec",
    S.PLAN: "plan",
    S.IMPLEMENTING: "impl",
    S.QA: "qa",
    S.REVIEW: "review",
    S.PR_OPEN: "pr",
    S.DOCS: "docs",
    S.DONE: "done",
    S.CANCELLED: "cancelled",
}


def chip_of(card: Card) -> str:
    """The state a card's chip names; a merged task's says so."""
    return "merged" if card.task.merged else CHIP[card.task.state]


def by_lane(cards: Iterable[Card]) -> dict[Lane, list[Card]]:
    """The cards of each lane in the order it shows them: those that need the operator
    first (in DONE's lane, the tasks ready to merge), then the newest first."""
    grouped: dict[Lane, list[Card]] = {lane: [] for lane in LANES}
    for card in cards:
        grouped[LANE_OF[card.task.state]].append(card)
    for lane_cards in grouped.values():
        lane_cards.sort(key=lambda c: c.task.state_since, reverse=True)
        lane_cards.sort(key=lambda c: c.human is None)  # stable: newest first within each
    return grouped
