"""The operator's verbs on the command line, built from their rows (core.domain.verbs): a
subcommand for each (`t25 approve`, …, `t25 task edit`), its arguments from what the verb
takes, and one handler (`t25_tui.cli.decisions:decide`) that builds the `Decision`.

What only the command line offers stays here, by verb: `t25 merge --dry-run` and `--json`.
"""

from __future__ import annotations

import argparse
from collections.abc import Callable
from typing import Any

from core.domain.verbs import VERBS, Input, Kind, Verb, VerbSpec
from t25_tui.cli.help import example_epilog
from t25_tui.cli.parser_common import TASK_TYPES, WORKING_STAGES, AddCommand, command, json_option

ID_HELP = "task id, e.g. T-7 or 7"
HANDLER = "decisions:decide"


def _merge_options(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--dry-run",
        action="store_true",
        help="show what the merge would take (commits, diff stat, checks, review, protected "
        "paths, the reviewed head) and whether it would be refused; merge nothing",
    )
    json_option(parser)


# What the command line adds to a verb, beside what the verb takes.
EXTRA_OPTIONS: dict[Verb, Callable[[argparse.ArgumentParser], None]] = {
    Verb.MERGE: _merge_options,
}


def _argument(parser: argparse.ArgumentParser, taken: Input) -> None:
    """One input as an argument: its option (or a positional), its type and default."""
    kw: dict[str, Any] = {"help": taken.help}
    if taken.metavar:
        kw["metavar"] = taken.metavar
    elif taken.option:  # `--comment COMMENT`, not the REST field's name
        kw["metavar"] = taken.option.lstrip("-").upper().replace("-", "_")
    match taken.kind:
        case Kind.WORDS:
            kw["default"] = None if taken.required else ""
        case Kind.PATHS:
            kw["action"] = "append"
        case Kind.STAGE:
            kw.update(type=str.upper, choices=WORKING_STAGES)
            kw["help"] += ": " + ", ".join(WORKING_STAGES)
        case Kind.TYPE:
            kw["choices"] = TASK_TYPES
        case Kind.PRIORITY:
            kw["type"] = int
        case Kind.PLAN | Kind.TITLE | Kind.DESCRIPTION:
            pass
    if taken.option == "":
        kw.pop("default", None)
        parser.add_argument(taken.name, **kw)
        return
    if taken.required:
        kw["required"] = True
        kw.pop("default", None)
    parser.add_argument(taken.flag, dest=taken.name, **kw)


def verb_arguments(parser: argparse.ArgumentParser, spec: VerbSpec) -> None:
    """The task's id, then what the verb takes, then what the command line adds."""
    parser.add_argument("id", help=ID_HELP)
    for taken in spec.takes:
        _argument(parser, taken)
    if extra := EXTRA_OPTIONS.get(spec.verb):
        extra(parser)
    parser.set_defaults(verb=spec.verb.value)


def verb_commands(add: AddCommand, group: str) -> None:
    """The top-level verbs `t25 --help` lists under `group`, in the table's order."""
    for spec in VERBS.values():
        if spec.group == group and len(spec.words) == 1:
            verb_arguments(add(spec.words[0], HANDLER, spec.help), spec)


def sub_verb(sub: argparse._SubParsersAction[Any], verb: Verb) -> None:
    """A verb that is a subcommand of another command (`t25 task edit`)."""
    spec = VERBS[verb]
    name = spec.words[-1]
    parser = sub.add_parser(
        name,
        help=spec.help,
        description=spec.description or spec.help[0].upper() + spec.help[1:] + ".",
        epilog=example_epilog(" ".join(spec.words)),
    )
    verb_arguments(parser, spec)
    parser.set_defaults(handler=command(HANDLER))
