"""Operator decisions from the command line: cancel, retry, archive, approve, reject,
answer, merge, acknowledge. Each builds the `Decision` the cockpit and the REST API build, and hands it
to the control plane's `decide`."""

from __future__ import annotations

import argparse

from core.domain.decisions import Decision, Verb
from core.domain.events import DecisionRecorded, WorktreeCleaned
from core.domain.states import WORKING
from core.domain.text import printable
from core.ports import Operations
from t25_tui.cli.context import actor_of, run


def _decide(args: argparse.Namespace, verb: Verb, text: str) -> int:
    async def body(control: Operations) -> None:
        sub = control.bus.subscribe()
        decision = Decision(verb=verb, task=args.id, actor=actor_of(args), text=text)
        task = await control.decide(decision)
        print(
            f"{task.id}  {task.state}{'  merged' if task.merged else ''}  {printable(task.title)}"
        )
        while (event := sub.get_nowait()) is not None:
            if isinstance(event, DecisionRecorded) and event.bound_to:
                print(f"  recorded on {event.bound_to}")
            if isinstance(event, WorktreeCleaned):
                print(f"  worktree: {printable(event.reason)}")
        if task.state in WORKING:
            print("  next: t25 run")

    run(args, body)
    return 0


def approve(args: argparse.Namespace) -> int:
    return _decide(args, Verb.APPROVE, args.comment or "")


def reject(args: argparse.Namespace) -> int:
    return _decide(args, Verb.REJECT, args.reason)


def answer(args: argparse.Namespace) -> int:
    return _decide(args, Verb.ANSWER, args.text)


def merge(args: argparse.Namespace) -> int:
    return _decide(args, Verb.MERGE, args.reason)


def cancel(args: argparse.Namespace) -> int:
    return _decide(args, Verb.CANCEL, args.reason)


def retry(args: argparse.Namespace) -> int:
    return _decide(args, Verb.RETRY, args.reason)


def archive(args: argparse.Namespace) -> int:
    return _decide(args, Verb.ARCHIVE, args.reason)


def acknowledge(args: argparse.Namespace) -> int:
    return _decide(args, Verb.ACKNOWLEDGE, args.reason)
