"""Operator decisions from the command line: `t25 cancel|retry|archive`.

Each calls the same Factory method as the cockpit and the REST API.
"""

from __future__ import annotations

import argparse

from core.service import Factory
from t25_tui.commands.context import actor_of, run


def _decide(args: argparse.Namespace, verb: str) -> int:
    async def body(factory: Factory) -> None:
        action = getattr(factory, verb)
        task = await action(args.id, actor=actor_of(args), reason=args.reason)
        print(f"{task.id}  {task.state}{'  (archived)' if task.archived else ''}  {task.title}")

    run(args, body)
    return 0


def cancel(args: argparse.Namespace) -> int:
    return _decide(args, "cancel")


def retry(args: argparse.Namespace) -> int:
    return _decide(args, "retry")


def archive(args: argparse.Namespace) -> int:
    return _decide(args, "archive")
