"""Domain objects: projects, tasks, runs, leases and artifacts.

These are what the store returns and what every face shows. They are immutable
values; a change is a new value written through the store.
"""

from __future__ import annotations

import re
from datetime import UTC, datetime
from enum import StrEnum

from pydantic import BaseModel, ConfigDict, Field

from core.domain.figures import Baseline, Figures, figures_line
from core.errors import NotFound


def utcnow() -> datetime:
    return datetime.now(UTC)


class TaskState(StrEnum):
    """The pipeline states, exactly as the seeds name them."""

    RECEIVED = "RECEIVED"
    SPEC = "SPEC"
    PLAN = "PLAN"
    AWAITING_APPROVAL = "AWAITING_APPROVAL"
    IMPLEMENTING = "IMPLEMENTING"
    QA = "QA"
    REVIEW = "REVIEW"
    PR_OPEN = "PR_OPEN"
    DOCS = "DOCS"
    DONE = "DONE"
    NEEDS_INPUT = "NEEDS_INPUT"
    FAILED = "FAILED"
    CANCELLED = "CANCELLED"


class TaskType(StrEnum):
    """What kind of change a task is; it names the task's branch (`feat/T-7`)."""

    FEAT = "feat"
    FIX = "fix"
    CHORE = "chore"
    DOCS = "docs"
    REFACTOR = "refactor"


class RunStatus(StrEnum):
    QUEUED = "queued"
    RUNNING = "running"
    SUCCEEDED = "succeeded"
    FAILED = "failed"
    CANCELLED = "cancelled"


class ArtifactKind(StrEnum):
    SPEC = "spec"
    PLAN = "plan"
    REVIEW = "review"
    QA_REPORT = "qa_report"
    DIFF = "diff"
    LOG = "log"
    DOCS = "docs"
    PROMPT = "prompt"
    VIOLATION = "violation"  # what a run changed outside its worktree, as it left it
    # The checks a merge's trial ran on the commit that became the default branch's head:
    # the figures later changes are shown beside (core.control.baselines).
    MERGE_CHECKS = "merge_checks"
    # What a pull request's CI and reviewers said when PR_OPEN sent the task back
    # (core.domain.pull_request_watch): the next dev run acts on it.
    PR_FEEDBACK = "pr_feedback"


class _Value(BaseModel):
    # Each value builds its validator the first time it is used, not when this module is
    # imported: `t25 task list` needs a few of them, and building all of them was most of
    # its start-up. (A default is a factory, never an instance, for the same reason.)
    model_config = ConfigDict(frozen=True, extra="forbid", defer_build=True)


# -- ids ---------------------------------------------------------------------------------

# ASCII only: `\d` and `\s` would take Arabic-Indic digits or a no-break space for an id.
_ID = re.compile(r"^\s*(?:(?P<prefix>[A-Za-z])-?)?(?P<n>[0-9]{1,19})\s*$", re.ASCII)
MAX_ID = 2**63 - 1  # ids are 64-bit integers in both stores


def format_id(prefix: str, number: int) -> str:
    return f"{prefix}-{number}"


def parse_id(prefix: str, text: str) -> int:
    """Accept `T-7`, `t7`, `T7` or plain `7` for a task id (prefix `T`); return 7.

    Anything else, and a number outside 1..MAX_ID, is NotFound: no such id can exist."""
    m = _ID.match(text)
    if not m or (m["prefix"] and m["prefix"].upper() != prefix) or not 0 < int(m["n"]) <= MAX_ID:
        noun = {"T": "task", "R": "run", "A": "artifact"}.get(prefix, "id")
        raise NotFound(
            f"{_shown(text)} is not a {noun} id",
            hint=f"{noun} ids look like {prefix}-7 (or just 7)",
        )
    return int(m["n"])


def _shown(text: str) -> str:
    """`text` quoted for an error message: short, and with nothing a terminal would act on."""
    return repr(text) if len(text) <= 40 else repr(text[:40]) + "…"


def task_id(text: str) -> str:
    return format_id("T", parse_id("T", text))


def run_id(text: str) -> str:
    return format_id("R", parse_id("R", text))


def artifact_id(text: str) -> str:
    return format_id("A", parse_id("A", text))


# -- projects and tasks ------------------------------------------------------------------


class Project(_Value):
    name: str
    repo_path: str
    default_branch: str


# A task's priority: higher runs first (the queue takes runs by priority, then age).
MIN_PRIORITY, MAX_PRIORITY = -100, 100


class NewTask(_Value):
    """What an operator files; the store gives it an id."""

    project: str
    title: str
    type: TaskType = TaskType.FEAT
    description: str = ""
    # The filer's own key for this filing (at most 100 characters): filed again under the
    # same key, the store returns the task it already holds, and files no second one.
    request_key: str | None = Field(default=None, min_length=1, max_length=100)
    priority: int = Field(default=0, ge=MIN_PRIORITY, le=MAX_PRIORITY)
    after: tuple[str, ...] = ()  # the tasks it waits for: it starts once each is merged


class Budget(_Value):
    """A budget an operator's answer set: USD and tokens, None where it named none."""

    usd: float | None = None
    tokens: int | None = None


class Task(_Value):
    id: str
    project: str
    title: str
    type: TaskType
    description: str = ""
    state: TaskState = TaskState.RECEIVED
    # The working stage a NEEDS_INPUT or FAILED task returns to (answer, retry).
    resume_state: TaskState | None = None
    archived: bool = False
    merged: bool = False
    qa_loops: int = 0
    review_loops: int = 0
    error: str | None = None
    approved_plan_sha: str | None = None
    # What code decided at the last QA and REVIEW (None: not decided yet); the merge gate.
    checks_passed: bool | None = None
    review_verdict: str | None = None
    reviewed_head: str | None = None  # the branch head REVIEW approved: what a merge merges
    # What a run changed outside its worktree, until an operator acknowledges it: while it
    # is set, retry and merge are refused.
    violation: str | None = None
    # The changed paths `policies.protected_paths` names, as of the last implementation: a
    # merge needs an approver to name each one.
    protected_paths: tuple[str, ...] = ()
    # The commit the next run starts from (a reset, or a retried implementation): its
    # worker moves the branch back there first. None: go on from the branch as it is.
    rewind_to: str | None = None
    # The task branch's head as T25's last run on it left it: every later run checks the
    # branch still holds it (core.workspace.branch_guard), and a second attempt starts there.
    branch_head: str | None = None
    # The task's own budget, raised by an operator's answer past limits.max_cost_usd and
    # limits.max_tokens; None: the configured one.
    budget_usd: float | None = None
    budget_tokens: int | None = None
    # A role's budget for this task, raised by an answer past `limits.by_role`, by role.
    role_budgets: dict[str, Budget] = Field(default_factory=dict)
    priority: int = 0
    after: tuple[str, ...] = ()  # the tasks it waits for; it leaves RECEIVED once all are merged
    # The filer's key it was filed under (`NewTask.request_key`): intake's is the issue it
    # came from (`github:acme/shop#12`, core.control.intake).
    request_key: str | None = None
    created_at: datetime
    state_since: datetime

    @property
    def branch(self) -> str:
        return f"{self.type.value}/{self.id}"


# The task fields a state change or an operator decision may set; nothing else mutates.
MUTABLE_TASK_FIELDS = frozenset(
    {
        "resume_state",
        "archived",
        "merged",
        "qa_loops",
        "review_loops",
        "error",
        "approved_plan_sha",
        "checks_passed",
        "review_verdict",
        "reviewed_head",
        "violation",
        "protected_paths",
        "rewind_to",
        "branch_head",
        "budget_usd",
        "budget_tokens",
        "role_budgets",
        # An operator's edit (`t25 task edit`), before the task is implemented.
        "title",
        "description",
        "type",
        "priority",
    }
)


# -- runs and leases -----------------------------------------------------------------------


class Usage(_Value):
    """Tokens one agent run reported; the basis of its cost estimate."""

    input_tokens: int = 0
    output_tokens: int = 0
    cache_read_tokens: int = 0
    cache_write_tokens: int = 0
    model: str | None = None


# The role of a run that merges a DONE task's branch on a host with the repository (a
# control plane without a checkout of it queues one: core.control.service).
MERGE_ROLE = "merge"


class NewRun(_Value):
    """A unit of work to put on the lease queue: one role of one stage of one task."""

    task_id: str
    stage: TaskState
    role: str
    max_attempts: int = 3
    # Queue it only while the task is in `stage` (StaleState otherwise): a sweep or a
    # decision that read the task a moment ago does not queue a stage it has since left.
    while_in_stage: bool = False


class Run(_Value):
    id: str
    task_id: str
    stage: TaskState
    role: str
    status: RunStatus = RunStatus.QUEUED
    attempts: int = 0
    max_attempts: int = 3
    worker: str | None = None
    lease_token: int = 0
    lease_expires_at: datetime | None = None
    adapter: str | None = None
    adapter_reason: str | None = None
    cli_version: str | None = None
    model: str | None = None
    exit_code: int | None = None
    error: str | None = None
    usage: Usage = Field(default_factory=Usage)
    # Each model request's tokens, in order, as its CLI reported them (adapters.parsing).
    requests: tuple[Usage, ...] = ()
    cost_usd: float = 0.0
    # The CLI session the run took place in, and the one it continued (None: it began a
    # fresh one). A QA or review send-back may continue the last dev run's (`resume:`).
    session_id: str | None = None
    resumed_session: str | None = None
    enqueued_at: datetime
    started_at: datetime | None = None
    finished_at: datetime | None = None


class Lease(_Value):
    """A worker's claim on a run: valid until `expires_at` (database clock), under `token`."""

    run_id: str
    task_id: str
    token: int
    worker: str
    expires_at: datetime


class RunOutcome(_Value):
    """What a worker reports when it completes a run under its lease."""

    status: RunStatus
    exit_code: int | None = None
    error: str | None = None
    adapter: str | None = None
    adapter_reason: str | None = None
    cli_version: str | None = None
    model: str | None = None
    usage: Usage = Field(default_factory=Usage)
    requests: tuple[Usage, ...] = ()  # each model request's tokens, as the CLI reported them
    cost_usd: float = 0.0
    session_id: str | None = None
    resumed_session: str | None = None


class Author(_Value):
    """Who wrote a task's change: the adapter of a succeeded IMPLEMENTING run, and the model
    names it went by (the profile's, and the one the CLI reported); none when unknown."""

    adapter: str
    models: tuple[str, ...] = ()


# A CLI's session id as T25 keeps and passes it back (a UUID, `ses_…`): nothing a CLI could
# read as an option, nothing that needs quoting.
SESSION_ID_PATTERN = r"^[A-Za-z0-9][A-Za-z0-9._:-]{0,199}$"


class ResumableSession(_Value):
    """The CLI session of a task's last dev run, which the dev run of a QA or review
    send-back may continue on the same adapter (a profile's `resume: true`)."""

    run_id: str
    adapter: str
    session_id: str = Field(pattern=SESSION_ID_PATTERN)


# -- artifacts -------------------------------------------------------------------------------


class ArtifactMeta(_Value):
    """Provenance of an artifact: which task, run, role and agent produced it."""

    kind: ArtifactKind
    media_type: str = "text/plain"
    task_id: str | None = None
    run_id: str | None = None
    role: str | None = None
    adapter: str | None = None
    cli_version: str | None = None
    model: str | None = None


class Artifact(_Value):
    id: str
    sha256: str
    size: int
    meta: ArtifactMeta
    created_at: datetime


class AuditAnchor(_Value):
    """The newest audit line's sequence number and hash, kept in the store."""

    seq: int
    hash: str


# -- what a worker measures in a worktree ------------------------------------------------------


class DiffStat(_Value):
    """How much a task's branch changes against the default branch."""

    files: tuple[str, ...] = ()
    renamed_from: tuple[str, ...] = ()  # the old names of renamed files (`files` has the new)
    removed: tuple[str, ...] = ()  # the files the change deletes (`files` has them too)
    added: int = 0
    deleted: int = 0
    # The largest file the change adds or changes, as it is at the branch's tip (a binary
    # file counts no lines: its bytes are what limits.max_file_bytes bounds).
    largest: str = ""
    largest_bytes: int = 0

    @property
    def touched(self) -> tuple[str, ...]:
        """Every path the change touches: each file, and where a renamed one came from."""
        return (*self.files, *self.renamed_from)

    @property
    def gone(self) -> tuple[str, ...]:
        """Every path the change takes away: each deleted file, and where a renamed one was."""
        return (*self.removed, *self.renamed_from)

    @property
    def lines(self) -> int:
        return self.added + self.deleted

    def summary(self) -> str:
        """e.g. '1 file, +12 -3'."""
        files = f"{len(self.files)} file{'' if len(self.files) == 1 else 's'}"
        return f"{files}, +{self.added} -{self.deleted}"


class CheckResult(_Value):
    """One configured QA check, run by T25 itself in the task's worktree."""

    name: str
    required: bool = True
    passed: bool
    exit_code: int | None = None
    excerpt: str = ""  # the tail of its output
    duration_s: float = 0.0
    # What its test runner reported, where T25 knows the runner (adapters.figures); None:
    # a runner T25 does not know, or a report it could not read.
    figures: Figures | None = None
    # Why it could not start at all - its program missing, the sandbox refusing it: an
    # environment error, never the change's (core.domain.check_start). None when it ran.
    start_error: str | None = None
    # Whether it ran in bubblewrap, where the main checkout is out of its reach.
    confined: bool = False

    def outcome(self, baseline: Baseline | None) -> str:
        """`passed (41 passed, 3 skipped — 3 more skipped than on main)`, or `FAILED` with
        its figures; `passed` alone for a runner T25 does not know."""
        state = "passed" if self.passed else "FAILED"
        if self.figures is None:
            return state
        return f"{state} ({figures_line(self.figures, self.name, baseline)})"
