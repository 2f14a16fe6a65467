"""PR_OPEN on a forge (`projects[].pull_request`): push the task's branch, open its pull request
(or update the one a first round opened) with the evidence as its body, then listen.

Listening is reading the pull request every `poll_s` until its head's CI has said all it
will: a review of that head requesting changes ends it at once; otherwise every check that
must pass (`checks`, or each one the forge reports) completes, and the watch comes to
`failing` (the failed ones, each with its log's last lines) or `green`. A head with no check
after `settle_s` has no CI, and is green. CI still running after `wait_s` is `timed_out`.
Only what is said of the head the worker pushed counts: a review of an older head was fed
back to the dev run that made this one.

What it heard is the run's report (core.domain.pull_request_watch); the control plane
decides (core.control.pull_request_decisions). The forge is reached by the worker, outside
every sandbox, with the operator's login: no agent reaches it.
"""

from __future__ import annotations

import asyncio
import contextlib
from dataclasses import dataclass
from typing import TYPE_CHECKING

from core.config.pull_request_config import PullRequestConfig
from core.domain.forge import Check, PullRequest, Review
from core.domain.models import Lease, Run, Task
from core.domain.pull_request_watch import (
    MAX_ITEMS,
    MAX_LOG,
    FailedCheck,
    LineComment,
    Mention,
    Outcome,
    PullRequestWatch,
    RequestedChanges,
    cut,
)
from core.domain.reports import RunReport
from core.errors import PublishFailed
from core.ports.forge import Forge, ForgeOpener
from core.ports.runs import RunQueue
from core.workspace.pull_request import publish, push_branch

if TYPE_CHECKING:
    from core.workspace.worktrees import Worktrees


@dataclass(frozen=True)
class Opened:
    """The pull request the stage opened, on the head it pushed."""

    pull: PullRequest
    head: str


async def pull_request_run(
    runs: RunQueue,
    lease: Lease,
    run: Run,
    task: Task,
    worktrees: Worktrees,
    config: PullRequestConfig | None,
    opener: ForgeOpener | None,
    abort: asyncio.Event,
) -> RunReport:
    """PR_OPEN's run: on the project's forge (`config`, its `pull_request:`), or with git and
    `gh` alone."""
    if config is None:
        return RunReport(note=await publish(worktrees, task))
    body = await runs.prompt(lease, run, task, [])  # the evidence (core.control.pull_request_body)
    return await open_and_watch(worktrees, task, body, config, opener, abort)


async def open_and_watch(
    worktrees: Worktrees,
    task: Task,
    body: str,
    config: PullRequestConfig,
    opener: ForgeOpener | None,
    abort: asyncio.Event,
) -> RunReport:
    """PR_OPEN's run on a forge: its report, with what the forge said."""
    if opener is None:
        raise PublishFailed(
            f"projects[].pull_request names the {config.forge} forge, and this worker cannot "
            "reach forges",
            hint="T25's own workers can (`t25 run`, `t25 serve`, `t25 worker`)",
        )
    await push_branch(worktrees, task)
    head = await worktrees.tip(task)
    if head is None:
        raise PublishFailed(f"the task's branch {task.branch} is gone", hint="`t25 reset`")
    forge = await opener(config)
    try:
        pull = await forge.open_pull_request(
            config.repo,
            head=task.branch,
            base=worktrees.default_branch,
            title=f"{task.title} ({task.id})",
            body=body,
        )
        opened = Opened(pull, head)
        if not config.watch:
            return _report(_heard(opened, "opened"))
        heard = await _listen(forge, config, opened, abort)
        if heard is None:
            return RunReport(error=f"stopped while watching pull request #{pull.number}")
        return _report(heard)
    finally:
        await forge.close()


async def _listen(
    forge: Forge, config: PullRequestConfig, opened: Opened, abort: asyncio.Event
) -> PullRequestWatch | None:
    """What the forge said of the head, or None when the run was stopped meanwhile."""
    loop = asyncio.get_running_loop()
    began = loop.time()
    repo, number, head = config.repo, opened.pull.number, opened.head
    while True:
        checks = _must_pass(await forge.checks(repo, head), config.checks)
        changes = _requested(await forge.reviews(repo, number), head, config.members)
        waited = loop.time() - began
        failed = [c for c in checks if c.failed]
        if changes:
            return await _told(forge, config, opened, "changes_requested", failed, changes)
        if _settled(checks, config, waited):
            outcome: Outcome = "failing" if failed else "green"
            return await _told(forge, config, opened, outcome, failed, ())
        if waited >= config.wait_s:
            return await _told(forge, config, opened, "timed_out", failed, ())
        with contextlib.suppress(TimeoutError):
            await asyncio.wait_for(abort.wait(), config.poll_s)
        if abort.is_set():  # cancelled, or the lease lost
            return None


def _must_pass(checks: list[Check], named: list[str]) -> list[Check]:
    """The checks that decide: those named, or every one (the newest of a name: a re-run
    replaces the run it repeats)."""
    newest = {c.name: c for c in sorted(checks, key=lambda c: c.id)}
    return [c for name, c in newest.items() if not named or name in named]


def _settled(checks: list[Check], config: PullRequestConfig, waited: float) -> bool:
    """Whether CI has said all it will of the head: each check that must pass has completed
    (a named one that never appeared has not), or none appeared once CI had time to."""
    if any(c.status != "completed" for c in checks):
        return False
    if config.checks:
        return {c.name for c in checks} >= set(config.checks)
    return bool(checks) or waited >= config.settle_s


def _requested(reviews: list[Review], head: str, members: list[str]) -> list[Review]:
    """The reviews of `head` requesting changes by the repository's `members`, each
    reviewer's newest review of it only (one who approved after requesting changes no
    longer requests them)."""
    newest: dict[str, Review] = {}
    for review in reviews:
        if review.standing not in members:
            continue
        if review.commit == head and review.state in ("APPROVED", "CHANGES_REQUESTED"):
            newest[review.author] = review
    return [r for r in newest.values() if r.state == "CHANGES_REQUESTED"]


async def _told(
    forge: Forge,
    config: PullRequestConfig,
    opened: Opened,
    outcome: Outcome,
    failed: list[Check],
    changes: list[Review] | tuple[()],
) -> PullRequestWatch:
    """What the watch heard, with the failed checks' logs and the mentions of T25."""
    logs = [
        FailedCheck(
            name=cut(c.name, 200),
            conclusion=c.conclusion or "",
            url=cut(c.url, 500),
            log=cut(
                await forge.check_log(config.repo, c, lines=config.log_lines), MAX_LOG, tail=True
            ),
        )
        for c in failed[:MAX_ITEMS]
    ]
    said = await forge.comments(config.repo, opened.pull.number)
    mention = config.mention.lower()
    mentions = [
        Mention(comment_id=c.id, author=cut(c.author, 100), body=cut(c.body))
        for c in said
        if mention in c.body.lower() and c.standing in config.members
    ][-MAX_ITEMS:]
    return _heard(opened, outcome, logs, [_changes(r) for r in changes][:MAX_ITEMS], mentions)


def _changes(review: Review) -> RequestedChanges:
    return RequestedChanges(
        review_id=review.id,
        author=cut(review.author, 100),
        body=cut(review.body),
        comments=tuple(
            LineComment(path=cut(c.path, 500), line=c.line, body=cut(c.body))
            for c in review.comments[:MAX_ITEMS]
        ),
    )


def _heard(
    opened: Opened,
    outcome: Outcome,
    failed: list[FailedCheck] | None = None,
    changes: list[RequestedChanges] | None = None,
    mentions: list[Mention] | None = None,
) -> PullRequestWatch:
    return PullRequestWatch(
        number=opened.pull.number,
        url=cut(opened.pull.url, 500),
        head=opened.head,
        outcome=outcome,
        failed_checks=tuple(failed or ()),
        changes=tuple(changes or ()),
        mentions=tuple(mentions or ()),
    )


def _report(watch: PullRequestWatch) -> RunReport:
    return RunReport(note=watch.summary(), pull_request=watch)
