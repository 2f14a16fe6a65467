"""What `--json` prints: one model per read command, the single source of its shape.

`t25 task list --json`, `task show --json`, `audit --json`, `cost --json` and
`doctor --json` each print one JSON object, and `logs --json` one object a line (JSON
Lines: it may follow a run as it goes), built from these models and nothing else, so
a script can rely on it: keys are snake_case, times ISO 8601 in UTC (`…Z`), ids strings
(`"T-7"`, `"R-12"`, `"A-3"`). A key may be added in a later version; none is renamed or
removed without a note in CHANGELOG.md. `SHAPES` names each one; the JSON Schema of a shape
is `SHAPES[name].model_json_schema(mode="serialization")`, and the tests validate every
command's output against it. docs/guides/command-line.md (Scripting) documents them for people.
"""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Annotated, Literal

from pydantic import BaseModel, ConfigDict, PlainSerializer, WithJsonSchema

from core.domain.audit import AuditEntry, Verdict
from core.domain.cost import CostSummary, Spend, StageTokens
from core.domain.detail import TaskDetail
from core.domain.events import DecisionRecorded, TaskTransitioned
from core.domain.figures import Baseline, Figures, figures_line
from core.domain.models import Artifact, CheckResult, Run, Task, Usage


def _utc(when: datetime) -> str:
    return when.astimezone(UTC).isoformat().replace("+00:00", "Z")


# A time as ISO 8601 in UTC, e.g. "2026-12-02T00:16:32.123456Z".
UtcTime = Annotated[
    datetime,
    PlainSerializer(_utc, return_type=str),
    WithJsonSchema({"type": "string", "format": "date-time"}),
]


class Shape(BaseModel):
    """A `--json` object: no key beyond those declared."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    def text(self) -> str:
        return self.model_dump_json(indent=2)


# -- tasks --------------------------------------------------------------------------------


class TaskJson(Shape):
    """One task, as `task list` and `task show` give it."""

    id: str
    project: str
    title: str
    type: str
    state: str
    branch: str
    description: str
    archived: bool
    merged: bool
    resume_state: str | None
    qa_loops: int
    review_loops: int
    error: str | None
    approved_plan_sha: str | None
    checks_passed: bool | None
    review_verdict: str | None
    reviewed_head: str | None
    violation: str | None
    protected_paths: list[str]
    priority: int
    after: list[str]  # the tasks it waits for, merged or not
    created_at: UtcTime
    state_since: UtcTime

    @classmethod
    def of(cls, task: Task) -> TaskJson:
        data = task.model_dump(mode="python", include=set(cls.model_fields))
        data.update(type=task.type.value, state=task.state.value, branch=task.branch)
        data["resume_state"] = task.resume_state.value if task.resume_state else None
        data["protected_paths"] = list(task.protected_paths)
        data["after"] = list(task.after)
        return cls(**data)


class TaskList(Shape):
    """`t25 task list --json`: a page of the tasks, in filing order; `next` the task the next
    page goes on after (`--after`), null on the last; `finished` how many finished tasks, by
    state, the list left out (without `--all` or `--state`)."""

    tasks: list[TaskJson]
    next: str | None = None
    finished: dict[str, int] = {}


class HistoryJson(Shape):
    """A state change (`kind: transition`) or an operator decision (`kind: decision`)."""

    kind: Literal["transition", "decision"]
    at: UtcTime
    actor: str
    reason: str
    from_state: str | None = None  # a transition's
    to_state: str | None = None
    decision: str | None = None  # a decision's
    bound_to: str | None = None


class UsageJson(Shape):
    input_tokens: int
    output_tokens: int
    cache_read_tokens: int
    cache_write_tokens: int

    @classmethod
    def of(cls, usage: Usage) -> UsageJson:
        return cls(**usage.model_dump(exclude={"model"}))


class RequestJson(UsageJson):
    """One model request's tokens, as the agent CLI reported them (`model`: when it named one)."""

    model: str | None

    @classmethod
    def of(cls, usage: Usage) -> RequestJson:
        return cls(**usage.model_dump())


class RunJson(Shape):
    """One agent run of a task's stage."""

    id: str
    stage: str
    role: str
    status: str
    attempts: int
    adapter: str | None
    adapter_reason: str | None
    cli_version: str | None
    model: str | None
    exit_code: int | None
    error: str | None
    usage: UsageJson
    requests: list[RequestJson]  # each model request, in order; [] when the CLI reports none
    cost_usd: float
    session_id: str | None  # the agent CLI's session
    resumed_session: str | None  # the session the run continued; null: a fresh one
    enqueued_at: UtcTime
    started_at: UtcTime | None
    finished_at: UtcTime | None

    @classmethod
    def of(cls, run: Run) -> RunJson:
        data = run.model_dump(
            include=set(cls.model_fields) - {"stage", "status", "usage", "requests"},
            mode="python",
        )
        return cls(
            **data,
            stage=run.stage.value,
            status=run.status.value,
            usage=UsageJson.of(run.usage),
            requests=[RequestJson.of(r) for r in run.requests],
        )


class ArtifactJson(Shape):
    """An artifact (spec, plan, diff, report, prompt, log): its hash and provenance."""

    id: str
    kind: str
    media_type: str
    size: int
    sha256: str
    run_id: str | None
    role: str | None
    adapter: str | None
    model: str | None
    created_at: UtcTime
    damaged: str | None  # why its content no longer matches its SHA-256, when it does not

    @classmethod
    def of(cls, artifact: Artifact, damaged: str | None = None) -> ArtifactJson:
        meta = artifact.meta
        return cls(
            id=artifact.id,
            kind=meta.kind.value,
            media_type=meta.media_type,
            size=artifact.size,
            sha256=artifact.sha256,
            run_id=meta.run_id,
            role=meta.role,
            adapter=meta.adapter,
            model=meta.model,
            created_at=artifact.created_at,
            damaged=damaged,
        )


class StageTokensJson(Shape):
    """One stage's runs, the model requests they reported, their tokens and cost:
    `input_tokens` not read from a cache (cache writes included), `cached_input_tokens`
    read from one."""

    runs: int
    requests: int
    input_tokens: int
    cached_input_tokens: int
    output_tokens: int
    usd: float

    @classmethod
    def of(cls, stage: StageTokens) -> StageTokensJson:
        return cls(**stage.model_dump())


class CostJson(Shape):
    """Estimated spend (USD, from `cost.rates` or the CLI's own figure) and tokens; each
    `by_…` sums to `total_usd` (`by_stage` in its `usd`, beside its tokens)."""

    total_usd: float
    runs: int
    usage: UsageJson
    by_role: dict[str, float]
    by_adapter: dict[str, float]
    by_model: dict[str, float]
    by_stage: dict[str, StageTokensJson]

    @classmethod
    def of(cls, cost: CostSummary) -> CostJson:
        data = cost.model_dump(mode="python", exclude={"usage", "by_stage"})
        stages = {name: StageTokensJson.of(s) for name, s in cost.by_stage.items()}
        return cls(**data, usage=UsageJson.of(cost.usage), by_stage=stages)


class SpendJson(Shape):
    """A task's spend against its budget (`null`: no budget); `unpriced` names the models
    that ran with no rate, whose $0 is no figure; `reached`: the next run waits for a human."""

    usd: float
    tokens: int
    budget_usd: float | None
    budget_tokens: int | None
    unpriced: list[str]
    reached: bool

    @classmethod
    def of(cls, spend: Spend) -> SpendJson:
        data = spend.model_dump(mode="python", exclude={"role"})  # a task's: no role
        return cls(**{**data, "unpriced": list(spend.unpriced), "reached": spend.reached})


class ConnectionJson(Shape):
    """A run's connections to one destination with one verdict (core.domain.network)."""

    run_id: str
    host: str
    port: int
    allowed: bool
    reason: str
    count: int
    sent: int  # bytes from the run, over those connections
    received: int


class FiguresJson(Shape):
    """What a check's test runner reported (`source`: pytest's summary line, or the JUnit
    XML report the check wrote)."""

    source: str
    passed: int
    failed: int
    skipped: int
    deselected: int
    xfailed: int
    xpassed: int
    errors: int

    @classmethod
    def of(cls, figures: Figures | None) -> FiguresJson | None:
        return None if figures is None else cls(**figures.model_dump())


class CheckJson(Shape):
    """One check of the task's last QA; `figures` when T25 knows its runner, beside the
    figures the same check reported on the default branch (`default_branch_figures`: as
    the last merge's trial ran it), and `line`, the two read together."""

    name: str
    required: bool
    passed: bool
    exit_code: int | None
    duration_s: float
    figures: FiguresJson | None
    default_branch: str | None
    default_branch_figures: FiguresJson | None
    line: str | None  # "41 passed, 3 skipped — 3 more skipped than on main"

    @classmethod
    def of(cls, check: CheckResult, baseline: Baseline | None) -> CheckJson:
        figures = check.figures
        return cls(
            name=check.name,
            required=check.required,
            passed=check.passed,
            exit_code=check.exit_code,
            duration_s=check.duration_s,
            figures=FiguresJson.of(figures),
            default_branch=baseline.branch if baseline else None,
            default_branch_figures=FiguresJson.of(
                baseline.figures.get(check.name) if baseline else None
            ),
            line=figures_line(figures, check.name, baseline) if figures else None,
        )


class TaskShow(Shape):
    """`t25 task show ID --json`: a task with its history, runs, artifacts and cost."""

    task: TaskJson
    history: list[HistoryJson]
    runs: list[RunJson]
    artifacts: list[ArtifactJson]
    cost: CostJson
    spend: SpendJson
    question: str | None
    blockers: list[str]  # the tasks of `after` not merged yet: it has not started
    network: list[ConnectionJson]  # its runs' connections through T25's proxy, counted
    checks: list[CheckJson]  # its last QA's, beside the default branch's figures

    @classmethod
    def of(cls, detail: TaskDetail) -> TaskShow:
        damaged = {d.id: d.error for d in detail.damaged}
        return cls(
            task=TaskJson.of(detail.task),
            history=[_history(event) for event in detail.history],
            runs=[RunJson.of(run) for run in detail.runs],
            artifacts=[ArtifactJson.of(a, damaged.get(a.id)) for a in detail.artifacts],
            cost=CostJson.of(detail.cost),
            spend=SpendJson.of(detail.spend),
            question=detail.question,
            blockers=list(detail.blockers),
            network=[ConnectionJson(**t.model_dump()) for t in detail.network],
            checks=[CheckJson.of(c, detail.baseline) for c in detail.checks],
        )


def _history(event: TaskTransitioned | DecisionRecorded) -> HistoryJson:
    if isinstance(event, TaskTransitioned):
        return HistoryJson(
            kind="transition",
            at=event.at,
            actor=event.actor,
            reason=event.reason,
            from_state=event.from_state.value,
            to_state=event.to_state.value,
        )
    return HistoryJson(
        kind="decision",
        at=event.at,
        actor=event.actor,
        reason=event.reason,
        decision=event.decision,
        bound_to=event.bound_to,
    )


# -- cost and audit ----------------------------------------------------------------------


class CostReport(CostJson):
    """`t25 cost --json`: every run's spend, and each task's (by id; a task with no runs
    is absent)."""

    by_task: dict[str, float]


class AuditLineJson(Shape):
    """One line of the audit log; `voided_by` is the later line that says it did not take
    effect, when one does."""

    seq: int
    ts: UtcTime
    actor: str
    task: str | None
    decision: str
    reason: str
    bound_to: str | None
    voids: int | None
    voided_by: int | None
    prev: str
    hash: str


class ChainJson(Shape):
    """The hash chain's verdict, as `t25 audit verify` checks it."""

    ok: bool
    lines: int
    message: str


class AuditLogJson(Shape):
    """`t25 audit --json`: the operator decisions (one task's with `--task`), oldest first."""

    entries: list[AuditLineJson]
    chain: ChainJson

    @classmethod
    def of(
        cls, entries: list[AuditEntry], voided: dict[int, int], verdict: Verdict
    ) -> AuditLogJson:
        """`voided`: each voided line's number -> the number of T25's line that voids it."""
        return cls(
            entries=[
                AuditLineJson(
                    **e.model_dump(mode="python", include=set(AuditLineJson.model_fields)),
                    voided_by=voided.get(e.seq),
                )
                for e in entries
            ],
            chain=ChainJson(ok=verdict.ok, lines=verdict.lines, message=verdict.message),
        )


# -- logs --------------------------------------------------------------------------------


class LogLine(Shape):
    """`t25 logs --json`: one line of an agent's output as read (`kind` as `t25 logs` colours
    it: `message`, `call`, `result`, `error`, `info`, `text`), or a run's start or end
    (`run_started`, `run_finished`, with no `stream`, its `line` the adapter or the outcome);
    a connection the run's network proxy decided has the stream `network` (kind `info`
    when allowed, `error` when denied); JSON Lines, in the order they came."""

    run_id: str | None
    kind: Literal[
        "message", "call", "result", "error", "info", "text", "run_started", "run_finished"
    ]
    stream: Literal["stdout", "stderr", "network"] | None
    line: str
    at: UtcTime


# -- doctor --------------------------------------------------------------------------------


class ConfigCheck(Shape):
    """The t25.yaml in use: `found` false before `t25 init` (the roles it would write are
    checked instead); `error` is the first thing wrong in it, with its line."""

    path: str | None
    found: bool
    error: str | None


class ToolCheck(Shape):
    """A program T25 itself uses (git, bubblewrap): where, which version, whether it will do."""

    path: str | None
    version: str | None
    ok: bool
    problem: str | None


class StoreCheck(Shape):
    """The store: its URL without a password; `reachable` is null for SQLite (a file)."""

    url: str
    reachable: bool | None
    problem: str | None


class LoginJson(Shape):
    """An agent CLI's login, as its own probe, a key variable or a credentials file says;
    `by` says which (never a secret)."""

    state: Literal["yes", "no", "unknown", "not checked", "not needed"]
    by: str


class AdapterCheck(Shape):
    """One adapter the configuration names."""

    name: str
    known: bool  # an adapter T25 ships
    path: str | None  # where it was found on PATH
    elsewhere: str | None  # not on PATH, but found here (e.g. .tools/npm/node_modules/.bin)
    version: str | None
    supported: bool  # the version is in the range T25 supports (or newer: it tries it)
    newer_than_tested: bool
    capabilities: dict[str, str | bool] | None
    login: LoginJson | None


class RoleCheck(Shape):
    """A role's chain and the adapter that would play it (null: none can)."""

    role: str
    project: str | None  # set for a project's own chain
    chain: list[str]
    plays: str | None


class ToolMapping(Shape):
    """What one CLI of a role's chain is given for the role's tool set (core.domain.tools)."""

    role: str
    project: str | None  # set for a project's own chain
    adapter: str
    tools: list[str] | None  # the tool classes; null: `tools: cli`, the CLI's own defaults
    args: list[str]  # the flags T25 adds for them
    env: dict[str, str]  # and the variables
    narrows: str | None  # how this CLI narrows a set, or what it cannot (its capabilities)


class RequestCost(Shape):
    """What one configured CLI and model resends with every model request: its system prompt
    and tool schemas, in bytes of JSON, as `bench/tokens.py` measured them
    (adapters.request_size)."""

    adapter: str
    model: str | None  # as the profile names it; null: the CLI's own default
    measured_on: str  # the model the figures were measured on
    t25_bytes: int  # under T25's tool sets (the largest, the dev run's)
    defaults_bytes: int  # with the CLI's own defaults (`tools: cli`)
    note: str  # what changes with the model, when something does


class ProjectOverrides(Shape):
    name: str
    overrides: list[str]


class Reach(Shape):
    """What one CLI of a role's chain may reach under `network: allowlist`: its model
    endpoints and what t25.yaml adds for the role."""

    role: str
    adapter: str
    hosts: list[str]


class WallVerdict(Shape):
    """One row of the sandbox table (docs/guides/security.md), with what holds on this machine."""

    attack: str
    verdict: str


class WallReport(Shape):
    """The wall around runs here: the sandbox probe's view from inside, the network the
    runs get, what each role's CLIs may reach, how resources are capped, and the verdicts."""

    probe: str
    root: bool
    network: str  # allowlist | none | shared, and why when the configured one cannot be had
    qa_network: str
    reach: list[Reach]
    caps: str
    verdicts: list[WallVerdict]


class DoctorReport(Shape):
    """`t25 doctor --json`: `ok` is false exactly when the command exits 1."""

    ok: bool
    config: ConfigCheck
    sandbox: str
    wall: WallReport
    git: ToolCheck
    bubblewrap: ToolCheck
    store: StoreCheck
    adapters: list[AdapterCheck]
    roles: list[RoleCheck]
    tools: list[ToolMapping]
    requests: list[RequestCost]
    projects: list[ProjectOverrides]
    problems: list[str]


SHAPES: dict[str, type[Shape]] = {
    "task-list": TaskList,
    "task-show": TaskShow,
    "audit": AuditLogJson,
    "cost": CostReport,
    "doctor": DoctorReport,
    "logs-line": LogLine,
}
