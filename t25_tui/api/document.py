"""The OpenAPI document of `t25 serve`: every answer a route can give, and who may call it.

Routes declare their answers with `answers` (a refusal is always JSON, `ErrorBody`, even
where the route answers something else). What depends on how one serve was started is
added when its document is built (`openapi`): the operator token's scheme and its 401 on
every operator route when a token is set (the admission check checks it; the document says so), the
worker credential on every worker route, and the configured projects as the values a
task's `project` may take; on every worker route, the 426 of a worker of another protocol.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from fastapi import FastAPI
from fastapi.openapi.utils import get_openapi

from t25_tui.api.bodies import ErrorBody
from t25_tui.api.gate import OPEN_PATHS, WORKER_PREFIX
from t25_tui.api.protocol import HEADER as PROTOCOL_HEADER
from t25_tui.api.protocol import PROTOCOL

_ERROR = {"application/json": {"schema": {"$ref": "#/components/schemas/ErrorBody"}}}
_ANSWERS = {
    400: "the input was refused (text with control characters, a bad configuration)",
    401: "the credential is missing or wrong",
    404: "no such task, run or artifact (or the id is not one)",
    408: "the request body stalled",
    409: "the task's state, or the lease, does not allow it",
    413: "the request body is over this endpoint's cap",
    422: "the request does not match this endpoint's fields",
    426: "the worker speaks another protocol version than this serve (T25-Protocol); "
    "the error says which side to upgrade",
    503: "the control plane cannot serve this now (no worker credential, the store is down, "
    "the audit log cannot be written)",
}
_SCHEMES = {
    "operatorToken": "an operator's token (the serve host's `.factory/operator-token`, "
    "T25_OPERATOR_TOKEN or one of T25_OPERATOR_TOKENS), as `Authorization: Bearer …`",
    "workerCredential": "a worker's credential (FACTORY_WORKER_CREDENTIAL or one of "
    "T25_WORKER_CREDENTIALS), as `Authorization: Bearer …`; every worker request also says "
    f"the worker protocol's version, `{PROTOCOL_HEADER}: {PROTOCOL}` (none said is 1)",
}


def answers(*codes: int) -> dict[int | str, dict[str, Any]]:
    """The refusals of a route: `codes`, and what any route may answer (408, 413, 422, 503)."""
    every = {408, 413, 422, 503, *codes}
    return {code: {"description": _ANSWERS[code], "content": _ERROR} for code in sorted(every)}


READ = answers(404)  # an operator's GET
DECIDE = answers(400, 404, 409)  # an operator's decision, or a new task
LEASE = answers(400, 404, 409)  # a worker's call under its lease


def openapi(api: FastAPI, *, projects: Sequence[str]) -> dict[str, Any]:
    """The document of one serve, built once: every route but OPEN_PATHS needs a
    credential."""
    if api.openapi_schema is None:
        doc = get_openapi(
            title=api.title, version=api.version, description=api.description, routes=api.routes
        )
        components = doc.setdefault("components", {})
        components.setdefault("schemas", {})["ErrorBody"] = ErrorBody.model_json_schema()
        components["securitySchemes"] = {
            name: {"type": "http", "scheme": "bearer", "description": _SCHEMES[name]}
            for name in sorted(_SCHEMES)
        }
        for path, operations in doc["paths"].items():
            scheme = _scheme(path)
            for operation in operations.values():
                if scheme:
                    operation["security"] = [{scheme: []}]
                    operation["responses"]["401"] = {
                        "description": _ANSWERS[401],
                        "content": _ERROR,
                    }
                    if scheme == "workerCredential":
                        _say_protocol(operation)
                    operation["responses"] = dict(sorted(operation["responses"].items()))
                _name_projects(operation, projects)
        _name_projects_in(components["schemas"].get("NewTaskBody", {}), projects)
        api.openapi_schema = doc
    return api.openapi_schema


def _say_protocol(operation: dict[str, Any]) -> None:
    """A worker route answers 426 to a worker of another protocol version. The header that
    says it is described with the worker credential, not as a parameter: a parameter would
    make every other header a request does not declare a wrong one."""
    operation["responses"]["426"] = {"description": _ANSWERS[426], "content": _ERROR}


def _scheme(path: str) -> str | None:
    if path in OPEN_PATHS:
        return None
    return "workerCredential" if path.startswith(WORKER_PREFIX) else "operatorToken"


def _name_projects(operation: dict[str, Any], projects: Sequence[str]) -> None:
    """A `project` query parameter takes the configured projects."""
    for parameter in operation.get("parameters", ()):
        if parameter.get("name") == "project":
            _name_projects_in({"properties": {"project": parameter["schema"]}}, projects)


def _name_projects_in(schema: dict[str, Any], projects: Sequence[str]) -> None:
    """A schema's `project` property (string or null) says which strings it takes."""
    field = schema.get("properties", {}).get("project")
    if field is None:
        return
    for option in field.get("anyOf", [field]):
        if option.get("type") == "string":
            option["enum"] = list(projects)
