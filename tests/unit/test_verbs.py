"""Each operator verb is declared once (core.domain.verbs): its rule, its command-line
subcommand, its REST route and body, its cockpit command and the door's checks all come from
its row, so a face cannot offer a verb, or an input, that another lacks."""

from __future__ import annotations

import argparse
import shlex

import pytest
from fastapi import FastAPI

from core.control.decision_door import at_the_door
from core.control.rulings import RULES
from core.domain.decisions import Decision
from core.domain.models import TaskState
from core.domain.verbs import VERBS, Dialog, Kind, Verb
from core.errors import InvalidInput, PolicyRefused
from t25_tui.api.routes.decisions import router
from t25_tui.api.verb_bodies import body_model, body_of, decision_from
from t25_tui.cli.decisions import decision_of
from t25_tui.cli.parser import build_parser
from t25_tui.tui.commands import COMMANDS, Place


def test_every_verb_has_one_row_and_one_rule():
    assert list(VERBS) == [spec.verb for spec in VERBS.values()]
    assert set(VERBS) == set(Verb) == set(RULES)


@pytest.mark.parametrize("verb", list(Verb))
def test_each_verb_s_example_parses_into_its_decision_on_the_command_line(verb):
    spec = VERBS[verb]
    args = build_parser().parse_args(shlex.split(spec.example)[1:])
    assert args.verb == verb.value and args.id == "T-7"
    if verb is Verb.MERGE:
        assert args.dry_run  # the example shows the question before the merge
        args = argparse.Namespace(**{**vars(args), "dry_run": False})
    decision = decision_of(args, spec)
    assert decision.verb is verb and decision.task == "T-7"
    assert at_the_door(decision) == decision  # the example passes the door as it is


@pytest.mark.parametrize("verb", list(Verb))
def test_each_verb_is_a_route_whose_body_is_what_the_verb_takes(verb):
    app = FastAPI()
    app.include_router(router)
    operation = app.openapi()["paths"][f"/tasks/{{ref}}/{verb.value}"]["post"]
    spec = VERBS[verb]
    assert operation["summary"] == spec.rest_summary
    assert f"`t25 {' '.join(spec.words)}`" in operation["summary"]
    fields = set(body_model(verb).model_fields)
    assert fields == {"actor", *(taken.name for taken in spec.takes)}


DECISIONS = [
    Decision(verb=Verb.APPROVE, task="T-7", actor="ana", text="ok", bound_to="sha256:" + "a" * 64),
    Decision(verb=Verb.REJECT, task="T-7", actor="ana", text="smaller"),
    Decision(verb=Verb.ANSWER, task="T-7", actor="ana", text="the v2 client"),
    Decision(verb=Verb.MERGE, task="T-7", actor="ana", allow_paths=("ci/a.yml", "ci/b.yml")),
    Decision(verb=Verb.ACKNOWLEDGE, task="T-7", actor="ana", text="mine"),
    Decision(verb=Verb.EDIT, task="T-7", actor="ana", changes={"type": "fix", "priority": 3}),
    Decision(verb=Verb.CANCEL, task="T-7", actor="ana", text="not needed"),
    Decision(verb=Verb.RETRY, task="T-7", actor="ana"),
    Decision(verb=Verb.RESET, task="T-7", actor="ana", stage=TaskState.PLAN, text="again"),
    Decision(verb=Verb.RECHECK, task="T-7", actor="ana"),
    Decision(verb=Verb.ARCHIVE, task="T-7", actor="ana", text="done"),
    Decision(verb=Verb.NOTE, task="T-7", actor="ana", text="keep the English line"),
]


def test_every_verb_is_sampled():
    assert {d.verb for d in DECISIONS} == set(Verb)


@pytest.mark.parametrize("decision", DECISIONS, ids=lambda d: d.verb.value)
def test_a_decision_crosses_the_wire_and_comes_back_the_same(decision):
    """The remote cockpit's body for a decision is what serve reads back into it."""
    body = body_model(decision.verb).model_validate(body_of(decision))
    assert decision_from(decision.verb, "T-7", "ana", body) == decision


@pytest.mark.parametrize("verb", list(Verb))
def test_the_door_refuses_what_a_verb_does_not_take(verb):
    taken = {taken.fills for taken in VERBS[verb].takes}
    given = {
        "bound_to": {"bound_to": "sha256:" + "a" * 64},
        "allow_paths": {"allow_paths": ("ci/a.yml",)},
        "stage": {"stage": TaskState.PLAN},
        "changes": {"changes": {"priority": 1}},
    }
    for field, value in given.items():
        if field in taken:
            continue
        decision = Decision(verb=verb, task="T-7", actor="ana", text="why", **value)
        with pytest.raises(InvalidInput, match=f"{verb.value} takes no"):
            at_the_door(decision)


def test_words_a_verb_needs_are_refused_with_its_example_as_the_hint():
    for spec in VERBS.values():
        words = spec.takes_kind(Kind.WORDS)
        if not (words and words.required):
            continue
        bare = Decision(
            verb=spec.verb,
            task="T-3",
            actor="ana",
            stage=TaskState.PLAN if spec.takes_kind(Kind.STAGE) else None,
        )
        with pytest.raises((PolicyRefused, InvalidInput)) as refused:
            at_the_door(bare)
        if words.refusal:
            assert refused.value.message == words.refusal
            assert refused.value.hint == spec.example.replace("T-7", "T-3")


def test_every_verb_with_keys_is_a_cockpit_command_that_asks_as_its_row_says():
    by_id = {c.id: c for c in COMMANDS}
    for spec in VERBS.values():
        if spec.dialog is Dialog.DECIDE:
            assert not spec.keys and spec.id not in by_id  # asked in the decide dialog (`a`)
            continue
        command = by_id[spec.id]
        assert command.keys == spec.keys and command.place is Place.TASK
        assert command.action == f"verb('{spec.verb.value}')"
        assert command.description == spec.line and command.title == spec.title
        if spec.dialog is Dialog.CONFIRM:
            assert "{tid}" in spec.question
