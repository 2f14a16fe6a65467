"""What the command line's parser areas share: a command's handler named by `module:function`
(imported only when its command runs, so `t25 --help` stays fast), `--json`, `--since`, and
the names of task types, states and working stages."""

from __future__ import annotations

import argparse
from collections.abc import Callable
from datetime import UTC, datetime

AddCommand = Callable[..., argparse.ArgumentParser]  # `build_parser`'s `add`: one command

DISTRIBUTION = "t25"  # the name pyproject.toml gives T25's package
TASK_TYPES = ("feat", "fix", "chore", "docs", "refactor")
STATES = (
    "RECEIVED",
    "SPEC",
    "PLAN",
    "AWAITING_APPROVAL",
    "IMPLEMENTING",
    "QA",
    "REVIEW",
    "PR_OPEN",
    "DOCS",
    "DONE",
    "NEEDS_INPUT",
    "FAILED",
    "CANCELLED",
)
WORKING_STAGES = ("SPEC", "PLAN", "IMPLEMENTING", "QA", "REVIEW", "PR_OPEN", "DOCS")


def command(name: str) -> Callable[[argparse.Namespace], int]:
    """A handler imported only when its command runs: `module:function` under t25_tui.cli."""
    module, func = name.split(":")

    def run(args: argparse.Namespace) -> int:
        import importlib

        handler: Callable[[argparse.Namespace], int]
        handler = getattr(importlib.import_module(f"t25_tui.cli.{module}"), func)
        return handler(args)

    return run


def json_option(parser: argparse.ArgumentParser) -> None:
    """`--json`: one JSON object instead of text, of the shape t25_tui.cli.shapes documents."""
    parser.add_argument(
        "--json", action="store_true", help="print one JSON object (docs/guides/command-line.md)"
    )


def positive_int(text: str) -> int:
    """A count of at least 1 (`--limit`)."""
    if not text.isdigit() or int(text) < 1:
        raise argparse.ArgumentTypeError(f"{text!r} is not a whole number of at least 1")
    return int(text)


def since(text: str) -> int | datetime:
    """`--since`: a sequence number, or a time (ISO 8601; UTC when it names no zone)."""
    if text.isdigit():
        return int(text)
    try:
        when = datetime.fromisoformat(text)
    except ValueError:
        raise argparse.ArgumentTypeError(
            f"{text!r} is neither a sequence number nor an ISO 8601 time"
        ) from None
    return when if when.tzinfo else when.replace(tzinfo=UTC)
