"""What a route takes from the app it is mounted on.

`make_api` puts one `Services` in `app.state`; a route names what it needs as a parameter
(`control: Control`), and FastAPI hands it over from the request's app. Routes hold no
closure over a control plane: the routers are modules, and one process could serve two.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Annotated

from fastapi import Depends, Request
from starlette.applications import Starlette

from core.control.run_queue import LocalRunQueue
from core.control.service import ControlPlane
from core.domain.text import MAX_ACTOR
from core.ports import Operations
from t25_tui.api.idempotency import RecentAnswers
from t25_tui.api.operators import Operator
from t25_tui.api.tail import EventTail
from t25_tui.api.uploads import LogUploads

API_ACTOR = "api"  # who decided, when a request does not say


def actor_of(request: Request, claimed: str | None) -> str:
    """Who decides: the operator whose token the request carried (the admission check put them in its
    state), with what the body claims beside it when that differs (`ana (claimed bob)`);
    with no operators known, what the body says."""
    operator = getattr(request.state, "operator", None)
    if not isinstance(operator, Operator):
        return claimed or API_ACTOR
    if claimed and claimed != operator.name:
        return f"{operator.name} (claimed {claimed})"[:MAX_ACTOR]
    return operator.name


@dataclass(frozen=True)
class Services:
    """One serve's control plane, its run queue for remote workers, its event tail, the
    answers it remembers for retried worker calls, and the run logs being uploaded to it."""

    control: ControlPlane
    runs: LocalRunQueue
    tail: EventTail
    uploads: LogUploads
    answers: RecentAnswers = field(default_factory=RecentAnswers)


def services_in(app: Starlette) -> Services:
    found = app.state.t25
    if not isinstance(found, Services):
        raise TypeError("an app built by make_api holds its Services in app.state.t25")
    return found


def services_of(request: Request) -> Services:
    return services_in(request.app)


def _control(request: Request) -> ControlPlane:
    return services_of(request).control


def _operations(request: Request) -> Operations:
    return services_of(request).control


def _runs(request: Request) -> LocalRunQueue:
    return services_of(request).runs


def _tail(request: Request) -> EventTail:
    return services_of(request).tail


def _answers(request: Request) -> RecentAnswers:
    return services_of(request).answers


def _uploads(request: Request) -> LogUploads:
    return services_of(request).uploads


Ops = Annotated[Operations, Depends(_operations)]  # what an operator's route calls, as every face
Control = Annotated[ControlPlane, Depends(_control)]  # the serve's own: its store, for /health
Runs = Annotated[LocalRunQueue, Depends(_runs)]
SharedTail = Annotated[EventTail, Depends(_tail)]
Remembered = Annotated[RecentAnswers, Depends(_answers)]
Uploads = Annotated[LogUploads, Depends(_uploads)]
