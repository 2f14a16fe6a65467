"""A decision the pipeline overtook is ruled again, not refused.

Every operator decides while holding the audit log's writer, so what moves a task between a
decision's reading of it and its writing is T25's pipeline, taking its next step (a task
leaving RECEIVED as it is cancelled). The store's compare-and-set refuses the write
(StaleState), the decision's line goes void, and the decision is read and ruled on again on
the task as it now is: a cancel or an edit takes effect, an approval bound to a plan the task
left is refused by its rule. A stale state with the task unmoved (an anchor another log moved)
is not the pipeline's and reaches the caller, as does the last try's.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import TypeVar

from core.domain.models import Task
from core.errors import StaleState

T = TypeVar("T")

# Each step the pipeline takes between a decision's reading and its writing is milliseconds,
# and its steps are seconds apart: a few tries are plenty.
RULED_AGAIN = 3


async def ruled_again_when_overtaken(
    read: Callable[[], Awaitable[Task]],
    decide: Callable[[Task], Awaitable[T]],
    *,
    again: int = RULED_AGAIN,
) -> T:
    """`decide` on the task `read` gives, read and decided on again (at most `again` more
    times) while the pipeline moves it between the two."""
    for left in reversed(range(again + 1)):
        task = await read()
        try:
            return await decide(task)
        except StaleState:
            if not left or (await read()).state is task.state:
                raise
    raise AssertionError("the last try returns or raises")
