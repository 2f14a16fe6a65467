"""The control plane's door: an operator decision's actor, words, paths, stage and changes
checked before anything is read (InvalidInput, PolicyRefused), whichever face it came from."""

from __future__ import annotations

from core.domain.decisions import Decision, Verb
from core.domain.models import MAX_PRIORITY, MIN_PRIORITY, TaskType
from core.domain.text import MAX_PATHS
from core.domain.text import actor as valid_actor
from core.domain.text import path as valid_path
from core.domain.text import reason as valid_reason
from core.errors import InvalidInput, PolicyRefused


def at_the_door(decision: Decision) -> Decision:
    """The decision with its actor and words checked (InvalidInput), before anything is
    read: a rejection needs its reason (the planner reads it), an answer its text."""
    actor = valid_actor(decision.actor)
    if decision.verb is Verb.REJECT and not decision.text.strip():
        raise PolicyRefused(
            "a rejection needs a reason; the planner reads it",
            hint=f't25 reject {decision.task} --reason "what is wrong with the plan"',
        )
    if decision.verb is Verb.ACKNOWLEDGE and not decision.text.strip():
        raise PolicyRefused(
            "an acknowledgement needs a reason: what was found and done about it",
            hint=f't25 acknowledge {decision.task} --reason "what you checked"',
        )
    what = {Verb.APPROVE: "comment", Verb.ANSWER: "answer"}.get(decision.verb, "reason")
    text = valid_reason(decision.text, what=what, required=decision.verb is Verb.ANSWER)
    if decision.allow_paths and decision.verb is not Verb.MERGE:
        raise PolicyRefused(
            f"only a merge names protected paths, not {decision.verb.value}",
            hint=f"t25 merge {decision.task} --allow-path PATH",
        )
    if len(decision.allow_paths) > MAX_PATHS:
        raise InvalidInput(
            f"a merge names {len(decision.allow_paths):,} paths; at most {MAX_PATHS:,}",
            hint="name the protected paths the task touches (t25 task show)",
        )
    if decision.verb is Verb.RESET and decision.stage is None:
        raise InvalidInput(
            "a reset names the stage to go back to",
            hint=f"t25 reset {decision.task} --to IMPLEMENTING",
        )
    if decision.stage is not None and decision.verb is not Verb.RESET:
        raise InvalidInput(f"only a reset names a stage, not {decision.verb.value}")
    edits = edit_changes(decision) if decision.verb is Verb.EDIT else {}
    if decision.changes and decision.verb is not Verb.EDIT:
        raise InvalidInput(f"only an edit changes a task's fields, not {decision.verb.value}")
    paths = tuple(valid_path(p) for p in decision.allow_paths)
    return decision.model_copy(
        update={"actor": actor, "text": text, "allow_paths": paths, "changes": edits}
    )


EDITABLE = ("title", "description", "type", "priority")


def edit_changes(decision: Decision) -> dict[str, str | int]:
    """An edit's changes, each checked as the filing door checks it."""
    from core.domain import text

    unknown = sorted(set(decision.changes) - set(EDITABLE))
    if unknown or not decision.changes:
        raise InvalidInput(
            f"an edit changes {', '.join(EDITABLE)}"
            + (f"; not {', '.join(unknown)}" if unknown else ": name at least one"),
            hint=f't25 task edit {decision.task} --title "…"',
        )
    out: dict[str, str | int] = {}
    for name, value in decision.changes.items():
        if name == "title":
            out[name] = text.title(str(value))
        elif name == "description":
            out[name] = text.description(str(value))
        elif name == "type":
            try:
                out[name] = TaskType(str(value)).value
            except ValueError:
                kinds = ", ".join(t.value for t in TaskType)
                raise InvalidInput(f"a task type is one of {kinds}, not {value!r}") from None
        else:
            if isinstance(value, bool) or not isinstance(value, int):
                raise InvalidInput(f"a priority is a whole number, not {value!r}")
            valid_priority(value)
            out[name] = value
    return out


def valid_priority(priority: int) -> None:
    if not MIN_PRIORITY <= priority <= MAX_PRIORITY:
        raise InvalidInput(
            f"a priority is from {MIN_PRIORITY} to {MAX_PRIORITY}, not {priority}",
            hint="higher runs first; 0 is the default",
        )
