"""An operator decision as a value: what was decided, on which task, by whom, bound to what.

Every face builds a `Decision` and hands it to `ControlPlane.decide` — the command line,
the cockpit, the REST API and a remote cockpit alike — so a decision can be checked,
audited, sent over the wire and tested as one thing. `text` is the decision's words: a
rejection's reason, an answer, an approval's comment, a note for the audit log.
`bound_to` is what the operator was shown, when the decision names it (the SHA-256 of the
plan approved): a decision bound to something that has changed since is refused.
`allow_paths` are the protected paths a merge names (policies.protected_paths): a merge
of a task that touches one is refused unless the decision names every one. `stage` is
where a reset sends the task back to; `changes` what an edit changes. Which of them each
verb takes is its row in core.domain.verbs.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from pydantic import BaseModel, ConfigDict

from core.domain.models import TaskState
from core.domain.verbs import VERBS, Kind, Verb


class Decision(BaseModel):
    """One operator decision, before it is checked, recorded and applied."""

    model_config = ConfigDict(frozen=True, extra="forbid", defer_build=True)

    verb: Verb
    task: str
    actor: str
    text: str = ""
    bound_to: str | None = None
    allow_paths: tuple[str, ...] = ()
    stage: TaskState | None = None  # where a reset goes back to
    # What an edit changes: any of title, description, type, priority.
    changes: dict[str, str | int] = {}

    @classmethod
    def given(cls, verb: Verb, task: str, actor: str, values: Mapping[str, Any]) -> Decision:
        """The decision a face's values make, each under the name its verb's row gives the
        input (the command line's arguments, a REST body's fields): words, the plan bound to,
        paths, a stage, an edit's changes."""
        fields: dict[str, Any] = {"changes": {}}
        for taken in VERBS[verb].takes:
            value = values.get(taken.name)
            match taken.kind:
                case Kind.WORDS:
                    fields["text"] = value or ""
                case Kind.PLAN:
                    fields["bound_to"] = value
                case Kind.PATHS:
                    fields["allow_paths"] = tuple(value or ())
                case Kind.STAGE:
                    fields["stage"] = TaskState(value) if value else None
                case Kind.TITLE | Kind.DESCRIPTION | Kind.TYPE | Kind.PRIORITY:
                    if value is not None:
                        fields["changes"][taken.name] = getattr(value, "value", value)
        return cls(verb=verb, task=task, actor=actor, **fields)
