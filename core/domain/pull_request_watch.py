"""What PR_OPEN heard from the forge while it watched a task's pull request: the checks that
failed on its head (with their logs' last lines), the reviews of its head that requested
changes (with their comments on lines), and the comments addressed to T25.

It crosses from a worker to the control plane in the run's report (core.domain.reports), and
is kept as the run's `pr_feedback` artifact when it sends the task back: the next dev run's
prompt quotes it (core.control.prompts). Every word in it is somebody else's (a CI job's log,
a reviewer's comment): bounded here, quoted to agents, escaped to the operator.
"""

from __future__ import annotations

from typing import Literal

from pydantic import BaseModel, ConfigDict, Field

MAX_LOG = 8_000  # of one failed check's log, the last characters kept
MAX_SAID = 4_000  # of one review, review comment or mention
MAX_ITEMS = 30  # failed checks, reviews, comments, mentions: each list at most this long

# What the watch came to: the pull request opened and not watched (`opened`), CI green and
# no changes requested (`green`), a failing check (`failing`), changes requested on its head
# (`changes_requested`), or CI still running when the wait ran out (`timed_out`).
Outcome = Literal["opened", "green", "failing", "changes_requested", "timed_out"]


class _Said(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid", defer_build=True)


class FailedCheck(_Said):
    """A CI check that failed on the pull request's head."""

    name: str = Field(max_length=200)
    conclusion: str = Field(max_length=40)
    url: str = Field(default="", max_length=500)
    log: str = Field(default="", max_length=MAX_LOG)  # its log's last lines, or its summary


class LineComment(_Said):
    """A reviewer's comment on a line of the change."""

    path: str = Field(max_length=500)
    line: int | None = None  # None: a line the change no longer has
    body: str = Field(max_length=MAX_SAID)


class RequestedChanges(_Said):
    """A review of the pull request's head that requested changes."""

    review_id: int
    author: str = Field(max_length=100)
    body: str = Field(default="", max_length=MAX_SAID)
    comments: tuple[LineComment, ...] = Field(default=(), max_length=MAX_ITEMS)


class Mention(_Said):
    """A comment in the pull request's conversation addressed to T25 (`pull_request.mention`)."""

    comment_id: int
    author: str = Field(max_length=100)
    body: str = Field(max_length=MAX_SAID)


class PullRequestWatch(_Said):
    """The pull request of a task as PR_OPEN left it, and what the forge said of its head."""

    number: int
    url: str = Field(default="", max_length=500)
    head: str = Field(max_length=64)  # the commit the checks and reviews are of
    outcome: Outcome
    failed_checks: tuple[FailedCheck, ...] = Field(default=(), max_length=MAX_ITEMS)
    changes: tuple[RequestedChanges, ...] = Field(default=(), max_length=MAX_ITEMS)
    mentions: tuple[Mention, ...] = Field(default=(), max_length=MAX_ITEMS)

    def summary(self) -> str:
        """In one line, what the forge said (the move's reason)."""
        where = f"pull request #{self.number}"
        match self.outcome:
            case "failing":
                names = ", ".join(c.name for c in self.failed_checks) or "a check"
                return f"CI failed on {where} ({names})"
            case "changes_requested":
                who = ", ".join(sorted({c.author for c in self.changes}))
                return f"changes requested on {where} by {who}"
            case "timed_out":
                return f"CI on {where} did not finish in time"
            case "green":
                return f"CI passed on {where}, no changes requested"
        return f"opened {where}"


def cut(text: str, limit: int = MAX_SAID, *, tail: bool = False) -> str:
    """`text` within `limit` characters: its start, or with `tail` its end (a log's last
    lines are what matter in it)."""
    if len(text) <= limit:
        return text
    return "…" + text[-(limit - 1) :] if tail else text[: limit - 1] + "…"
