"""How T25's errors cross the wire: each class has a stable code and an HTTP status.

`t25 serve` answers a refusal as `{error, hint, code}` with the status below; its clients
(`worker_client.Http`, and so the remote worker and the remote cockpit) read the code
back and raise the class the server raised, so a caller on the far side of REST catches
what it would catch in process: a 409 `lease_lost` is `LeaseLost`, a 409 `stale_state`
is `StaleState`. The table is the one place both sides read; a code once given is never
reused for another class.

A refusal that is no T25 error (the admission check's, FastAPI's) has a code of its own (`WIRE_CODES`)
and no class; a client maps those, and codes it does not know (a newer serve), by status.
"""

from __future__ import annotations

from dataclasses import dataclass

from core.errors import (
    AnswerInvalid,
    ArtifactCorrupted,
    AuditError,
    BranchMoved,
    ConfigError,
    ControlPlaneUnreachable,
    CredentialRefused,
    DiskFull,
    ForgeError,
    ForgeUnavailable,
    GitError,
    IllegalTransition,
    InvalidInput,
    LeaseLost,
    MergeRefused,
    MergeUnrecorded,
    NoAdapter,
    NotFound,
    PolicyRefused,
    PromptTemplateError,
    ProtocolMismatch,
    PublishFailed,
    StaleState,
    StoreError,
    StoreUnavailable,
    T25Error,
    WorktreeBusy,
    WorktreeRefused,
)


@dataclass(frozen=True)
class WireError:
    """One T25 error class as it crosses the wire."""

    kind: type[T25Error]
    code: str
    status: int


# Statuses stay within what the OpenAPI document declares (see t25_tui.api.document):
# 400 refused input, 404 nothing there, 409 the state or the lease does not allow it,
# 422 content that fails its check, 426 a worker of another protocol version (the admission check's,
# on worker routes), 503 the control plane cannot serve this now.
PROTOCOL_MISMATCH = "protocol_mismatch"
ERRORS: tuple[WireError, ...] = (
    WireError(T25Error, "t25_error", 400),
    WireError(ConfigError, "config_error", 400),
    WireError(PromptTemplateError, "prompt_template_error", 400),
    WireError(InvalidInput, "invalid_input", 400),
    WireError(NotFound, "not_found", 404),
    WireError(IllegalTransition, "illegal_transition", 409),
    WireError(StaleState, "stale_state", 409),
    WireError(LeaseLost, "lease_lost", 409),
    WireError(ArtifactCorrupted, "artifact_corrupted", 422),
    WireError(StoreError, "store_error", 503),
    WireError(StoreUnavailable, "store_unavailable", 503),
    WireError(AuditError, "audit_error", 503),
    WireError(DiskFull, "disk_full", 503),
    WireError(PolicyRefused, "policy_refused", 409),
    WireError(MergeRefused, "merge_refused", 409),
    WireError(MergeUnrecorded, "merge_unrecorded", 503),  # git has it: `t25 merge` records it
    WireError(ControlPlaneUnreachable, "control_plane_unreachable", 503),
    # Raised by a worker of the 401 or 403 its serve answered; a serve never answers it.
    WireError(CredentialRefused, "credential_refused", 503),
    WireError(NoAdapter, "no_adapter", 409),
    WireError(GitError, "git_error", 400),
    WireError(WorktreeRefused, "worktree_refused", 409),
    WireError(BranchMoved, "branch_moved", 409),
    WireError(WorktreeBusy, "worktree_busy", 409),
    WireError(PublishFailed, "publish_failed", 503),
    WireError(ForgeError, "forge_error", 503),
    WireError(ForgeUnavailable, "forge_unavailable", 503),
    WireError(AnswerInvalid, "answer_invalid", 422),
    WireError(ProtocolMismatch, PROTOCOL_MISMATCH, 426),
)
BY_CLASS = {e.kind: e for e in ERRORS}
BY_CODE = {e.code: e for e in ERRORS}

# Refusals that are no T25 error: the admission check's and the framework's.
UNAUTHORIZED = "unauthorized"  # 401: the credential is missing or wrong
FORBIDDEN = "forbidden"  # 403: the operator's role does not allow it
NO_WORKER_CREDENTIAL = "no_worker_credential"  # 503: serve accepts no workers
BODY_STALLED = "body_stalled"  # 408
BODY_TOO_LARGE = "body_too_large"  # 413
INVALID_JSON = "invalid_json"  # 422: not JSON, or an object too wide
INVALID_REQUEST = "invalid_request"  # 422: the fields do not match the endpoint's
NO_ROUTE = "no_route"  # 404: no such endpoint
METHOD_NOT_ALLOWED = "method_not_allowed"  # 405
HTTP_ERROR = "http_error"  # any other status the framework answers
WIRE_CODES = frozenset(
    {
        UNAUTHORIZED,
        FORBIDDEN,
        NO_WORKER_CREDENTIAL,
        BODY_STALLED,
        BODY_TOO_LARGE,
        INVALID_JSON,
        INVALID_REQUEST,
        NO_ROUTE,
        METHOD_NOT_ALLOWED,
        HTTP_ERROR,
    }
)


CODES = tuple(sorted({*BY_CODE, *WIRE_CODES}))  # every code a refusal can carry


def wire_error(exc: T25Error) -> WireError:
    """The row of the most specific class `exc` is an instance of."""
    for kind in type(exc).__mro__:
        if kind in BY_CLASS:
            return BY_CLASS[kind]
    raise AssertionError("T25Error is in the table")  # every T25 error derives from it


def error_class(code: str | None) -> type[T25Error] | None:
    """The class a server raised, from the code it answered with (None: a wire-only code,
    or one this client does not know)."""
    found = BY_CODE.get(code) if code else None
    return found.kind if found else None
