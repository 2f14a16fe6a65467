"""The REST body of each operator verb, built from its row (core.domain.verbs), and the way
between a body and a `Decision` both ways: serve reads a body into a decision, the remote
cockpit writes a decision into a body.

Each input's kind says its field's type and bounds (t25_tui.api.bodies): words are a reason
(an answer, when required), a plan is `sha256:…`, paths are repository paths, a stage is a
working stage, an edit's fields are a new task's. A verb whose inputs change a task's fields
(an edit) needs at least one of them; the document says so too.
"""

from __future__ import annotations

import functools
from typing import Any, ClassVar, Literal

from pydantic import BaseModel, ConfigDict, Field, create_model, model_validator

from core.domain.decisions import Decision
from core.domain.models import TaskType
from core.domain.states import WORKING
from core.domain.text import MAX_PATHS
from core.domain.verbs import VERBS, Input, Kind, Verb, VerbSpec
from t25_tui.api.bodies import (
    Actor,
    Answer,
    Body,
    Description,
    PlanBinding,
    Priority,
    Reason,
    RepoPath,
    Title,
)

_Stage = Literal[tuple(s.value for s in WORKING)]  # type: ignore[valid-type]  # built from WORKING


def _field(taken: Input) -> tuple[Any, Any]:
    """One input's annotation and default in its verb's body."""
    match taken.kind:
        case Kind.WORDS:
            # Words whose absence is refused by the door (409, with the hint) are optional here.
            return (Answer, ...) if taken.required and not taken.refusal else (Reason, "")
        case Kind.PLAN:
            return PlanBinding | None, None
        case Kind.PATHS:
            return list[RepoPath], Field([], max_length=MAX_PATHS)
        case Kind.STAGE:
            return _Stage, ...
        case Kind.TITLE:
            return Title | None, None
        case Kind.DESCRIPTION:
            return Description | None, None
        case Kind.TYPE:
            return TaskType | None, None
        case Kind.PRIORITY:
            return Priority | None, None


def _changing(spec: VerbSpec) -> tuple[str, ...]:
    return tuple(t.name for t in spec.takes if t.fills == "changes")


class VerbBody(Body):
    """What every verb's body carries: the actor it claims (beside the operator's token)."""

    actor: Actor | None = None


def _one_of_changing(schema: dict[str, Any], model: type[BaseModel]) -> None:
    """The document says it too: at least one of the fields it changes, not null."""
    changing: tuple[str, ...] = getattr(model, "changing", ())
    schema["anyOf"] = [
        {"required": [k], "properties": {k: {"not": {"type": "null"}}}} for k in changing
    ]


class _ChangesBody(VerbBody):
    """A body whose verb changes a task's fields: at least one of them is given."""

    model_config = ConfigDict(json_schema_extra=_one_of_changing)
    changing: ClassVar[tuple[str, ...]] = ()  # set on each verb's own class

    @model_validator(mode="after")
    def _changes_something(self) -> _ChangesBody:
        names = type(self).changing
        if all(getattr(self, name) is None for name in names):
            raise ValueError(f"name at least one of {', '.join(names)}")
        return self


@functools.cache
def body_model(verb: Verb) -> type[VerbBody]:
    """The REST body of `verb`: the actor it claims, and what the verb takes."""
    spec = VERBS[verb]
    fields: dict[str, Any] = {taken.name: _field(taken) for taken in spec.takes}
    changing = _changing(spec)
    name = f"{verb.value.capitalize()}Body"
    if not changing:
        return create_model(name, __base__=VerbBody, **fields)
    model = create_model(name, __base__=_ChangesBody, **fields)
    model.changing = changing  # a class attribute, not a field
    return model


def decision_from(verb: Verb, ref: str, actor: str, body: VerbBody) -> Decision:
    """The decision a request's body makes."""
    values = {taken.name: getattr(body, taken.name) for taken in VERBS[verb].takes}
    return Decision.given(verb, ref, actor, values)


def body_of(decision: Decision) -> dict[str, Any]:
    """The body that asks serve for `decision` (the remote cockpit's request)."""
    body: dict[str, Any] = {"actor": decision.actor}
    for taken in VERBS[decision.verb].takes:
        match taken.kind:
            case Kind.WORDS:
                body[taken.name] = decision.text
            case Kind.PLAN:
                if decision.bound_to is not None:
                    body[taken.name] = decision.bound_to
            case Kind.PATHS:
                body[taken.name] = list(decision.allow_paths)
            case Kind.STAGE:
                body[taken.name] = decision.stage.value if decision.stage else None
            case _:
                if taken.name in decision.changes:
                    body[taken.name] = decision.changes[taken.name]
    return body
