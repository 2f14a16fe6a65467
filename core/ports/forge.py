"""What T25 asks of a forge: open a pull request, read its checks and reviews, comment, merge
it; read and label the tracker's issues. Implemented for GitHub (and GitHub Enterprise) by
`adapters.github_forge`, over its REST API with the operator's own login.

`repo` is the forge's name of a repository (`owner/name`). Every call is one request or one
paged read, retried by the adapter through the forge's own faults (5xx, timeouts, its rate
limit) up to a bound, then ForgeUnavailable; a request the forge refuses (no such
repository, no permission, a bad field) is ForgeError, with its words.

GitLab fits the same port, call for call: a merge request for a pull request (`iid` for
`number`), its pipeline's jobs for the checks (a job's trace for a failed check's log), an
unresolved discussion or a revoked approval for "changes requested" (`Review.state`), its notes
for comments, `PUT …/merge_requests/:iid/merge` with `sha` for a merge bound to the head that
was reviewed (GitLab refuses a moved head with 409, as GitHub does), and its issues with
labels for intake.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Sequence
from typing import Protocol

from core.config.pull_request_config import PullRequestConfig
from core.domain.forge import Check, Comment, ForgeIssue, PullRequest, Review


class Forge(Protocol):
    """One forge, reached with the operator's own credential."""

    async def open_pull_request(
        self, repo: str, *, head: str, base: str, title: str, body: str
    ) -> PullRequest:
        """The open pull request of branch `head` into `base`: opened with `title` and `body`,
        or, when one is open already (a retried stage), that one with its body made `body`."""
        ...

    async def pull_request(self, repo: str, number: int) -> PullRequest: ...

    async def checks(self, repo: str, sha: str) -> list[Check]:
        """Every CI check of commit `sha`, in the forge's order."""
        ...

    async def check_log(self, repo: str, check: Check, *, lines: int = 40) -> str:
        """The last `lines` lines of a check's log (its summary when the forge keeps no log)."""
        ...

    async def reviews(self, repo: str, number: int) -> list[Review]:
        """The pull request's reviews, oldest first, each with the comments it left on lines."""
        ...

    async def comments(self, repo: str, number: int, *, after: int = 0) -> list[Comment]:
        """The conversation of an issue or a pull request, oldest first: the comments with
        an id above `after`."""
        ...

    async def comment(self, repo: str, number: int, body: str) -> Comment: ...

    async def merge(self, repo: str, number: int, *, head: str, title: str, message: str) -> str:
        """Merge the pull request through the forge (its branch protections and required
        reviews apply), only while its head is `head`: the commit of the merge, or
        MergeRefused with the forge's reason (its head moved, a required check or review
        missing, a conflict) — nothing merged."""
        ...

    async def issues(
        self, repo: str, *, labels: Sequence[str] = (), query: str | None = None
    ) -> list[ForgeIssue]:
        """The open issues (never pull requests) holding every one of `labels`, or those a
        search `query` finds, oldest first."""
        ...

    async def issue(self, repo: str, number: int) -> ForgeIssue: ...

    async def add_labels(self, repo: str, number: int, labels: Sequence[str]) -> None: ...

    async def close(self) -> None:
        """Let go of its connections."""
        ...


# How T25 reaches the forge a project's pull requests are on (`projects[].pull_request`): the
# shipped one is t25_tui.runtime.open_forge, over adapters.github_forge.
ForgeOpener = Callable[[PullRequestConfig], Awaitable[Forge]]
