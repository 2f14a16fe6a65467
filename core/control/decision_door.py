"""The control plane's door: an operator decision's actor, words, paths, stage and changes
checked against its verb's row (core.domain.verbs) before anything is read (InvalidInput,
PolicyRefused), whichever face it came from."""

from __future__ import annotations

from core.domain.decisions import Decision
from core.domain.models import MAX_PRIORITY, MIN_PRIORITY, TaskType
from core.domain.text import MAX_PATHS
from core.domain.text import actor as valid_actor
from core.domain.text import path as valid_path
from core.domain.text import reason as valid_reason
from core.domain.verbs import VERBS, Kind, Verb, VerbSpec
from core.errors import InvalidInput, PolicyRefused


def at_the_door(decision: Decision) -> Decision:
    """The decision with its actor and words checked (InvalidInput), before anything is
    read: it names only what its verb takes (its row in core.domain.verbs), and the words
    its verb needs (a rejection's reason, which the planner reads; an answer)."""
    spec = VERBS[decision.verb]
    actor = valid_actor(decision.actor)
    words = spec.takes_kind(Kind.WORDS)
    if words is not None and words.refusal and not decision.text.strip():
        raise PolicyRefused(words.refusal, hint=_example(spec, decision))
    text = valid_reason(
        decision.text,
        what=words.said_as if words else "reason",
        required=bool(words and words.required),
    )
    _names_only_what_it_takes(decision, spec)
    edits = edit_changes(decision) if spec.takes_kind(Kind.TITLE) else {}
    if len(decision.allow_paths) > MAX_PATHS:
        raise InvalidInput(
            f"a merge names {len(decision.allow_paths):,} paths; at most {MAX_PATHS:,}",
            hint="name the protected paths the task touches (t25 task show)",
        )
    paths = tuple(valid_path(p) for p in decision.allow_paths)
    return decision.model_copy(
        update={"actor": actor, "text": text, "allow_paths": paths, "changes": edits}
    )


def _example(spec: VerbSpec, decision: Decision) -> str:
    """The verb's example, on the decision's task: the hint of a refusal."""
    return spec.example.replace("T-7", decision.task, 1)


def _names_only_what_it_takes(decision: Decision, spec: VerbSpec) -> None:
    """Refused: a field the verb does not take, or a required one left out."""
    verb = decision.verb.value
    given = {
        "bound_to": decision.bound_to is not None,
        "allow_paths": bool(decision.allow_paths),
        "stage": decision.stage is not None,
        "changes": bool(decision.changes),
    }
    taken = {i.fills for i in spec.takes}
    for field, named in given.items():
        if named and field not in taken:
            owners = [s for s in VERBS.values() if any(i.fills == field for i in s.takes)]
            raise InvalidInput(
                f"{verb} takes no {_FIELD_WORDS[field]}; "
                + " or ".join(f"t25 {' '.join(s.words)}" for s in owners)
                + " does"
            )
    for needed in spec.takes:
        if needed.required and needed.fills in given and not given[needed.fills]:
            raise InvalidInput(
                f"a {verb} names {_FIELD_WORDS[needed.fills]}", hint=_example(spec, decision)
            )


_FIELD_WORDS = {
    "bound_to": "plan to bind to",
    "allow_paths": "protected paths",
    "stage": "the stage to go back to",
    "changes": "changes to a task's fields",
}


EDITABLE = tuple(t.name for t in VERBS[Verb.EDIT].takes if t.fills == "changes")


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
