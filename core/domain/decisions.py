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

from pydantic import BaseModel, ConfigDict

from core.domain.models import TaskState
from core.domain.verbs import Verb


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
