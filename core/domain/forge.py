"""What T25 reads from a forge — the place a team keeps its repositories, issues and pull
requests (GitHub, GitHub Enterprise; GitLab's shapes fit, see core.ports.forge) — as plain
values: an issue to file a task from, a pull request and what its CI and its reviewers said.

Everything here is written by people and programs outside T25 (an issue's body, a review
comment, a CI job's log): it is a claim, shown to agents quoted and to the operator escaped,
and never decides a gate by itself.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Literal

# A check's conclusion once it completed, as GitHub names them (a GitLab job's status maps
# onto these: success, failed → failure, canceled → cancelled, skipped, manual → action_required).
FAILED_CONCLUSIONS = frozenset({"failure", "timed_out", "cancelled", "action_required"})


@dataclass(frozen=True)
class ForgeIssue:
    """An issue of the tracker."""

    number: int
    title: str
    body: str
    labels: tuple[str, ...]
    state: Literal["open", "closed"]
    url: str
    author: str


@dataclass(frozen=True)
class PullRequest:
    """A pull request (GitLab: a merge request), as the forge has it now."""

    number: int
    url: str
    head_ref: str  # the branch it proposes
    head_sha: str  # the commit its head is at
    base_ref: str
    state: Literal["open", "closed"]
    merged: bool = False


@dataclass(frozen=True)
class Check:
    """One CI check of a commit (a GitHub check run; a GitLab pipeline job)."""

    id: int
    name: str
    status: Literal["queued", "in_progress", "completed"]
    conclusion: str | None  # once completed: success, failure, neutral, skipped, …
    url: str = ""
    summary: str = ""  # what the check itself said of its result, if anything

    @property
    def failed(self) -> bool:
        return self.status == "completed" and self.conclusion in FAILED_CONCLUSIONS


@dataclass(frozen=True)
class ReviewComment:
    """A reviewer's comment on a line of the change."""

    id: int
    author: str
    body: str
    path: str
    line: int | None  # None: on a line the change no longer has (outdated)
    review_id: int | None = None


@dataclass(frozen=True)
class Review:
    """A review of a pull request: its verdict and the comments it left on lines."""

    id: int
    author: str
    state: Literal["APPROVED", "CHANGES_REQUESTED", "COMMENTED", "DISMISSED", "PENDING"]
    body: str
    commit: str  # the head it reviewed
    comments: tuple[ReviewComment, ...] = field(default=())
    # How the author stands to the repository (GitHub's `author_association`: OWNER, MEMBER,
    # COLLABORATOR, CONTRIBUTOR, NONE, …; GitLab: a member's access level).
    standing: str = ""


@dataclass(frozen=True)
class Comment:
    """A comment in an issue's or a pull request's conversation."""

    id: int
    author: str
    body: str
    # How the author stands to the repository (GitHub's `author_association`: OWNER, MEMBER,
    # COLLABORATOR, CONTRIBUTOR, NONE, …; GitLab: a member's access level).
    standing: str = ""
