"""The `t25` command line's parser: the global options, `--version`, and every command by
area (t25_tui.cli.parser_tasks, t25_tui.cli.parser_tools).

Only argparse is imported here, so `t25 --help` stays fast: a command's handler is named by
`module:function` under t25_tui.cli and imported only when the command runs.
"""

from __future__ import annotations

import argparse
from collections.abc import Sequence
from typing import Any

from t25_tui.cli.help import Parser, example_epilog, grouped_help
from t25_tui.cli.parser_common import DISTRIBUTION, command
from t25_tui.cli.parser_tasks import decision_commands, recovery_commands, task_commands
from t25_tui.cli.parser_tools import (
    audit_commands,
    cockpit_commands,
    reading_commands,
    serving_commands,
    setup_commands,
    tool_commands,
)


def _global_options(parser: argparse.ArgumentParser, *, defaults: bool) -> None:
    """`--config`, `--actor`, `--debug`. The top-level parser holds their defaults; every
    subcommand takes them too, with SUPPRESS as default, so an option given after the
    command overrides one given before it and an absent one changes nothing."""
    kept: dict[str, Any] = {} if defaults else {"default": argparse.SUPPRESS}
    group = parser.add_argument_group("global options")
    group.add_argument(
        "--config",
        metavar="PATH",
        help="t25.yaml to use (default: the nearest "
        "t25.yaml from the current directory up to the repository root)",
        **kept,
    )
    group.add_argument(
        "--actor",
        help="who you decide for: recorded as claimed, beside your OS user and git identity",
        **kept,
    )
    group.add_argument("--debug", action="store_true", help="show tracebacks on errors", **kept)


class _Version(argparse.Action):
    """`t25 --version`: the installed distribution's version, looked up only when asked
    (argparse's own version action wants the text when the parser is built, and reading
    package metadata would then slow every command down)."""

    def __init__(self, option_strings: Sequence[str], dest: str, **kwargs: Any) -> None:
        super().__init__(option_strings, dest, nargs=0, default=argparse.SUPPRESS, **kwargs)

    def __call__(
        self,
        parser: argparse.ArgumentParser,
        namespace: argparse.Namespace,
        values: str | Sequence[Any] | None,
        option_string: str | None = None,
    ) -> None:
        from importlib.metadata import PackageNotFoundError, version

        try:
            text = version(DISTRIBUTION)
        except PackageNotFoundError:  # a bare checkout on sys.path, never installed
            text = "(not installed)"
        print(f"t25 {text}")
        parser.exit()


class _Subcommand(Parser):
    """A subcommand's parser, which takes the global options too. Its own subcommands
    (`task new`, `audit verify`) are of this class as well: argparse makes them so."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        kwargs.setdefault("formatter_class", argparse.RawDescriptionHelpFormatter)
        super().__init__(*args, **kwargs)
        _global_options(self, defaults=False)


class _Top(Parser):
    """`t25` itself, whose --help lists the commands by group (t25_tui.cli.help)."""

    commands: argparse._SubParsersAction[Any] | None = None

    def format_help(self) -> str:
        return grouped_help(self, self.commands) if self.commands else super().format_help()


def build_parser() -> argparse.ArgumentParser:
    parser = _Top(
        prog="t25",
        description="T25 runs coding-agent CLIs through a governed pipeline, each task in its "
        "own git worktree; humans approve risky plans and merge.",
        epilog="Start with `t25 init` in a git repository, or `t25 demo` for a tour.",
    )
    parser.add_argument("--version", action=_Version, help="print the version of T25 and exit")
    _global_options(parser, defaults=True)
    sub = parser.add_subparsers(
        dest="command", metavar="COMMAND", title="commands", parser_class=_Subcommand
    )
    parser.commands = sub

    def add(
        name: str, handler: str, help: str, *, runs_agents: bool = False, **kw: Any
    ) -> argparse.ArgumentParser:
        """A command; one that `runs_agents` first sweeps the prompt files a killed T25 left."""
        description = help[0].upper() + help[1:] + "."
        p = sub.add_parser(
            name, help=help, description=description, epilog=example_epilog(name), **kw
        )
        p.set_defaults(handler=command(handler), runs_agents=runs_agents)
        return p

    setup_commands(sub, add)
    task_commands(sub, add)
    recovery_commands(sub, add)
    decision_commands(sub, add)
    reading_commands(sub, add)
    serving_commands(sub, add)
    cockpit_commands(sub, add)
    tool_commands(sub, add)
    audit_commands(sub, add)
    return parser
