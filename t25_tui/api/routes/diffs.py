"""A task's diff: the whole branch's change, or one implementing attempt's."""

from __future__ import annotations

from typing import Annotated

from fastapi import APIRouter, Query

from core.domain.diffs import TaskDiff
from t25_tui.api import document
from t25_tui.api.services import Ops

router = APIRouter()

MAX_ATTEMPT = 10_000  # no task is implemented this many times


@router.get("/tasks/{ref}/diff", response_model=TaskDiff, responses=document.READ)
async def task_diff(
    control: Ops,
    ref: str,
    attempt: Annotated[int | None, Query(ge=1, le=MAX_ATTEMPT)] = None,
    stat: bool = False,
) -> TaskDiff:
    """The task's change against the default branch (`t25 diff`), or implementing attempt
    `attempt`'s (1 the first; 404 past the last); `stat` leaves out the text, keeping each
    file's path and line counts. The text is cut at a line end past 4,000,000 characters,
    and `truncated` says so; the file counts are always whole."""
    return await control.diff(ref, attempt=attempt, stat=stat)
