"""Operator decisions from the command line: cancel, retry, archive, approve, reject,
answer, merge. Each calls the same ControlPlane method as the cockpit and the REST API."""

from __future__ import annotations

import argparse

from core.control.service import ControlPlane
from core.domain.events import DecisionRecorded, WorktreeCleaned
from core.domain.states import WORKING
from core.domain.text import printable
from t25_tui.cli.context import actor_of, run


def _decide(args: argparse.Namespace, verb: str, *extra) -> int:
    async def body(control: ControlPlane) -> None:
        sub = control.bus.subscribe()
        task = await getattr(control, verb)(
            args.id,
            *extra,
            actor=actor_of(args),
            **({"reason": args.reason} if "reason" in args else {}),
        )
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
    args.reason = args.comment or ""
    return _decide(args, "approve")


def reject(args: argparse.Namespace) -> int:
    return _decide(args, "reject")


def answer(args: argparse.Namespace) -> int:
    return _decide(args, "answer", args.text)


def merge(args: argparse.Namespace) -> int:
    return _decide(args, "merge")


def cancel(args: argparse.Namespace) -> int:
    return _decide(args, "cancel")


def retry(args: argparse.Namespace) -> int:
    return _decide(args, "retry")


def archive(args: argparse.Namespace) -> int:
    return _decide(args, "archive")
