"""What a request to `t25 serve` may carry, and how a request that carries something else is
answered.

Every body is a model here, and every field of it is bounded as the store and the domain
bound it, so the OpenAPI document says exactly what is accepted and nothing outside it
reaches a store (a 64-bit id column, a 32-bit exit code, Postgres text that cannot hold
NUL). Text a person types (titles, descriptions, actors, reasons, answers, worker names)
is checked by `core.domain.text`, which refuses it with a 400 that names the character and its
position; its `pattern` in the document is the same rule, spelled for JSON Schema (a test
holds the two together). Text an agent produced (its output, its final answer, its error)
may hold any character: what a store cannot keep (NUL) is replaced on the way in.

A refused request is answered `{error, hint, code}`: the fields that were wrong and why, a
few at most, and never the value that was sent.
"""

from __future__ import annotations

import functools
import re
from collections.abc import Sequence
from datetime import datetime
from functools import partial
from typing import Annotated, Any, Literal

from fastapi import Response
from pydantic import (
    AfterValidator,
    BaseModel,
    BeforeValidator,
    ConfigDict,
    Field,
    TypeAdapter,
    WithJsonSchema,
)

from core.domain import text
from core.domain.agent import AgentResult, RunLog
from core.domain.manifests import ManifestChange
from core.domain.models import (
    MAX_PRIORITY,
    MIN_PRIORITY,
    SESSION_ID_PATTERN,
    CheckResult,
    DiffStat,
    Lease,
    TaskType,
    Usage,
)
from core.domain.reports import RunReport
from core.domain.text import (
    MAX_ACTOR,
    MAX_DESCRIPTION,
    MAX_PATH,
    MAX_REASON,
    MAX_TITLE,
)
from t25_tui.api.errors import CODES, INVALID_REQUEST

MAX_WORKER_NAME = 200
MAX_REQUESTS = 100_000  # model requests one run reports (a long agent loop makes hundreds)
MAX_LISTED = 5  # fields named in one refusal

# -- text a person typed --------------------------------------------------------------------

# The characters core.domain.text refuses, as one class that Python, ECMA-262 (JSON Schema) and
# Rust regexes read alike. Lone surrogates are refused as well, at the gate: a JSON escape
# of one is not valid JSON, and no UTF-8 text can hold one.
_REFUSED = r"\x00-\x08\x0b-\x1f\x7f-\x9f\u061c\u200e\u200f\u2028\u2029\u202a-\u202e\u2066-\u2069"
# What str.strip() removes: a one-line text is stripped before it is checked, so its ends may
# hold any of these; a required text needs one character that is neither this nor refused.
_SPACE = r"\t\n\x0b\x0c\r\x1c-\x1f \x85\xa0\u1680\u2000-\u200a\u2028\u2029\u202f\u205f\u3000"
ONE_LINE_REQUIRED = (
    rf"^[{_SPACE}]*[^\t\n{_REFUSED}]*[^{_SPACE}{_REFUSED}]"
    rf"[^\t\n{_REFUSED}]*[{_SPACE}]*$"
)
MULTI_LINE = rf"^(?:[^{_REFUSED}]|\r\n)*$"  # a CRLF is taken as a line end
MULTI_LINE_REQUIRED = (
    rf"^(?:[^{_REFUSED}]|\r\n)*[^{_SPACE}{_REFUSED}]"
    rf"(?:[^{_REFUSED}]|\r\n)*$"
)


def _bounds(*, limit: int, pattern: str, required: bool = False) -> Any:
    """A str field's bounds, as the document states them (`core.domain.text` checks them)."""
    return Field(
        min_length=1 if required else 0, max_length=limit, json_schema_extra={"pattern": pattern}
    )


Title = Annotated[
    str,
    _bounds(limit=MAX_TITLE, pattern=ONE_LINE_REQUIRED, required=True),
    AfterValidator(text.title),
]
Description = Annotated[
    str, _bounds(limit=MAX_DESCRIPTION, pattern=MULTI_LINE), AfterValidator(text.description)
]
Actor = Annotated[
    str,
    _bounds(limit=MAX_ACTOR, pattern=ONE_LINE_REQUIRED, required=True),
    AfterValidator(text.actor),
]
Reason = Annotated[str, _bounds(limit=MAX_REASON, pattern=MULTI_LINE), AfterValidator(text.reason)]
Answer = Annotated[
    str,
    _bounds(limit=MAX_REASON, pattern=MULTI_LINE_REQUIRED, required=True),
    AfterValidator(partial(text.reason, what="answer", required=True)),
]
WorkerName = Annotated[
    str,
    _bounds(limit=MAX_WORKER_NAME, pattern=ONE_LINE_REQUIRED, required=True),
    AfterValidator(partial(text.checked, what="worker name", limit=MAX_WORKER_NAME, required=True)),
]
# What an approval was made on: the SHA-256 of the plan the approver read.
PlanBinding = Annotated[str, Field(pattern=r"^sha256:[0-9a-f]{64}$")]

# -- what a worker sends ---------------------------------------------------------------------


def _storable(value: str) -> str:
    """Agent output as a store can keep it: Postgres text cannot hold NUL."""
    return value.replace("\x00", "\ufffd")


# The integers every JSON parser reads exactly (I-JSON, RFC 7493); the 64-bit columns they
# land in hold more.
MAX_JSON_INT = 2**53 - 1

Output = Annotated[str, AfterValidator(_storable)]  # agent output: any character
Count = Annotated[int, Field(ge=0, le=MAX_JSON_INT)]  # tokens, lines, fencing tokens
ExitCode = Annotated[int, Field(ge=-(2**31), le=2**31 - 1)]  # runs.exit_code is 32-bit
Seconds = Annotated[float, Field(ge=0, le=10**9)]
CommitId = Annotated[str, Field(pattern=r"^[0-9a-f]{40}(?:[0-9a-f]{24})?$")]  # SHA-1 or SHA-256
TtlS = Annotated[float, Field(gt=0, le=3600)]
SessionId = Annotated[str, Field(pattern=SESSION_ID_PATTERN)]  # an agent CLI's session
RunId = Annotated[str, Field(pattern=r"^R-[1-9][0-9]{0,17}$")]
RequestKey = Annotated[str, Field(pattern=r"^[A-Za-z0-9._:-]{1,100}$")]
TaskId = Annotated[str, Field(pattern=r"^T-[1-9][0-9]{0,17}$")]
TaskRef = Annotated[str, Field(pattern=r"^(?:T-)?[1-9][0-9]{0,17}$")]  # T-7, or 7


def _whole_number(value: object) -> object:
    """A JSON integer (3, or 3.0, which JSON Schema counts as one), never a boolean or a
    string of digits."""
    if isinstance(value, bool | str):
        raise ValueError("must be a whole number")
    return value


Priority = Annotated[
    int,
    Field(ge=MIN_PRIORITY, le=MAX_PRIORITY),
    BeforeValidator(_whole_number),
    WithJsonSchema({"type": "integer", "minimum": MIN_PRIORITY, "maximum": MAX_PRIORITY}),
]


class HeldLease(Lease):
    """A lease as its worker sends it back: the run and the fencing token decide."""

    run_id: RunId
    task_id: TaskId
    token: Count


class UsageSent(Usage):
    input_tokens: Count = 0
    output_tokens: Count = 0
    cache_read_tokens: Count = 0
    cache_write_tokens: Count = 0
    model: Output | None = None


class CheckSent(CheckResult):
    name: Output
    exit_code: ExitCode | None = None
    excerpt: Output = ""
    duration_s: Seconds = 0.0
    start_error: Output | None = None


class DiffStatSent(DiffStat):
    files: tuple[Output, ...] = ()
    renamed_from: tuple[Output, ...] = ()
    added: Count = 0
    deleted: Count = 0


class ManifestSent(ManifestChange):
    path: Output
    before: Output | None = None
    after: Output | None = None


class RunLogSent(RunLog):
    """A run's log as its completion names it: uploaded before (`PUT /worker/log`); `path`
    is the worker's own, and serve reads its copy instead."""

    size: Count


class AgentResultSent(AgentResult):
    adapter: Output
    cli_version: Output | None = None
    model: Output | None = None
    exit_code: ExitCode | None = None
    final_text: Output = ""
    usage: UsageSent = UsageSent()
    requests: tuple[UsageSent, ...] = Field((), max_length=MAX_REQUESTS)
    cost_usd: Annotated[float, Field(ge=0, le=10**9)] | None = None
    error: Output | None = None
    files_changed: tuple[Output, ...] = ()
    log: RunLogSent | None = None
    duration_s: Seconds = 0.0
    session_id: SessionId | None = None
    resumed_session: SessionId | None = None


class RunReportSent(RunReport):
    result: AgentResultSent | None = None
    adapter_reason: Output | None = None
    error: Output | None = None
    violation: tuple[Output, ...] = ()
    diff_stat: DiffStatSent | None = None
    manifests: tuple[ManifestSent, ...] = Field((), max_length=1000)
    checks: tuple[CheckSent, ...] = ()
    note: Output = ""
    needs_input: Output | None = None
    head: CommitId | None = None
    commit: CommitId | None = None
    committed: tuple[Output, ...] = Field((), max_length=100_000)


class _WorkerEvent(BaseModel):
    model_config = ConfigDict(extra="forbid")
    # The envelope as a worker's Event carries it. The lease names the task and the run, and
    # the control plane's clock stamps the event: these are accepted and not used.
    at: datetime | None = None
    task_id: str | None = None
    run_id: str | None = None
    # Its place in its lease's outbox (1, 2, …): a batch sent again, to this serve or another,
    # is kept once (migration 0018).
    seq: Annotated[int, Field(ge=1, le=10**12)] | None = None


# Events are kept whole in the events table (the store keeps what it can of any text), so
# their text is not touched here.
class RunStartedSent(_WorkerEvent):
    kind: Literal["run_started"]
    worker: str
    adapter: str | None = None
    adapter_reason: str | None = None
    cli_version: str | None = None
    model: str | None = None
    attempt: Annotated[int, Field(ge=1, le=10**6)] = 1
    head: CommitId | None = None  # the branch head as the run began: where a reset goes back


class RunOutputSent(_WorkerEvent):
    kind: Literal["run_output"]
    stream: Literal["stdout", "stderr", "network"]
    text: str


WorkerEvent = Annotated[RunStartedSent | RunOutputSent, Field(discriminator="kind")]

# -- bodies ----------------------------------------------------------------------------------


class Body(BaseModel):
    model_config = ConfigDict(extra="forbid")


class NewTaskBody(Body):
    title: Title
    type: TaskType = TaskType.FEAT
    description: Description = ""
    # One of t25.yaml's: the document names them (t25_tui.api.document), the route refuses
    # any other (422).
    project: str | None = None
    actor: Actor | None = None
    # The filer's key for this filing: sent again (a retry after a lost reply), the task
    # filed the first time is the answer, and no second one is filed.
    request_key: RequestKey | None = None
    priority: Priority = 0  # higher runs first
    # The tasks it waits for: it starts once each of them is merged.
    after: list[TaskRef] = Field([], max_length=100)


RepoPath = Annotated[
    str,
    _bounds(limit=MAX_PATH, pattern=ONE_LINE_REQUIRED, required=True),
    AfterValidator(text.path),
]


class ClaimBody(Body):
    worker: WorkerName
    ttl_s: TtlS = 30.0


class LeaseBody(Body):
    lease: HeldLease
    ttl_s: TtlS = 30.0


class PromptBody(Body):
    lease: HeldLease
    ttl_s: TtlS = 30.0
    checks: list[CheckSent] = Field([], max_length=100)
    # The run continues the session of the task's last dev run: the prompt of what is new.
    continuing: bool = False


class EventsBody(Body):
    lease: HeldLease
    ttl_s: TtlS = 30.0
    events: list[WorkerEvent] = Field(max_length=1000)


class CompleteBody(Body):
    lease: HeldLease
    report: RunReportSent


class ErrorBody(BaseModel):
    """Every refusal: one line for a person, what to do next when there is something, and a
    stable code (t25_tui.api.errors) from which a client raises the server's error class."""

    error: str
    hint: str | None = None
    code: str = Field(json_schema_extra={"enum": list(CODES)})


# -- answers -----------------------------------------------------------------------------------


@functools.cache
def _list_of(model: type[BaseModel]) -> TypeAdapter[list[Any]]:
    return TypeAdapter(list[model])  # type: ignore[valid-type]  # a model chosen at run time


def json_list(model: type[BaseModel], items: Sequence[BaseModel]) -> Response:
    """A list of models as JSON in one step: the board of a remote cockpit reads thousands of
    tasks and runs, and FastAPI's own encoding of that many dicts costs several times more."""
    return Response(_list_of(model).dump_json(list(items)), media_type="application/json")


# -- refusals --------------------------------------------------------------------------------

_NAME = re.compile(r"^[A-Za-z_][A-Za-z0-9_-]{0,40}$")
_PLACES = {
    "body": "body",
    "query": "query parameter",
    "path": "path parameter",
    "header": "header",
    "cookie": "cookie",
}


def invalid_request(errors: Sequence[Any]) -> dict[str, str | None]:
    """`{error, hint, code}` for pydantic's errors: where and what, for the first MAX_LISTED."""
    shown = [_described(e) for e in errors[:MAX_LISTED]]
    more = len(errors) - len(shown)
    listed = "; ".join(shown) + (f"; and {more:,} more" if more else "")
    return {
        "error": f"the request is not valid: {listed}",
        "hint": "/openapi.json describes every endpoint's fields and their bounds",
        "code": INVALID_REQUEST,
    }


def _described(error: dict[str, Any]) -> str:
    place, *path = error.get("loc") or ("body",)
    what = error.get("type", "")
    if what == "extra_forbidden":  # its name is the client's own: it is not repeated
        path, message = path[:-1], "holds a field this endpoint does not take"
    elif what == "union_tag_invalid":  # pydantic's message repeats the tag that was sent
        message = f"must be one of {error.get('ctx', {}).get('expected_tags', '…')}"
    elif what == "json_invalid":
        path, message = [], f"is not valid JSON ({error.get('ctx', {}).get('error', '')})"
    else:
        message = text.printable(str(error.get("msg", what)))[:200]
    where = _PLACES.get(str(place), "body")
    names = "".join(
        f"[{p}]" if isinstance(p, int) else f".{p}" if _NAME.match(str(p)) else ".…" for p in path
    ).lstrip(".")
    return f"{where} {names}: {message}" if names else f"{where} {message}"
