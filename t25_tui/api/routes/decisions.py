"""The operator decisions over REST: `POST /tasks/{id}/<verb>` for each verb of
core.domain.verbs, its body built from what the verb takes (t25_tui.api.verb_bodies).

Each route builds the `Decision` the command line and the cockpit build and hands it to the
control plane's `decide`: the same check, the same audit line, the same event.
"""

from collections.abc import Awaitable, Callable

from fastapi import APIRouter, Request

from core.domain.models import Task
from core.domain.verbs import VERBS, Verb, VerbSpec
from t25_tui.api import document
from t25_tui.api.services import Ops, actor_of
from t25_tui.api.verb_bodies import VerbBody, body_model, decision_from

router = APIRouter()


def _route(verb: Verb) -> Callable[..., Awaitable[Task]]:
    async def decide(control: Ops, request: Request, ref: str, body: VerbBody) -> Task:
        decision = decision_from(verb, ref, actor_of(request, body.actor), body)
        return await control.decide(decision)

    decide.__annotations__["body"] = body_model(verb)  # the verb's own body, in the document
    decide.__name__ = verb.value
    return decide


def _description(spec: VerbSpec) -> str:
    """The route's description: what the verb does, and each field it takes."""
    fields = "\n".join(f"- `{t.name}`: {t.help}" for t in spec.takes)
    return f"{spec.help[0].upper()}{spec.help[1:]}.\n\n{fields}"


for _spec in VERBS.values():
    router.add_api_route(
        f"/tasks/{{ref}}/{_spec.verb.value}",
        _route(_spec.verb),
        methods=["POST"],
        name=_spec.verb.value,
        response_model=Task,
        responses=document.DECIDE,
        summary=_spec.rest_summary,
        description=_description(_spec),
    )
