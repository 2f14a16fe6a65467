"""How the `t25` command line explains itself: the top-level help grouped by what a command
is for, an example on every command's help, "did you mean" for a mistyped command or choice,
and internal commands (`__complete-ids`) kept out of sight.

argparse, the standard library and the verbs' table only: `t25 --help` stays fast.
"""

from __future__ import annotations

import argparse
from collections.abc import Sequence
from typing import Any

from core.domain.verbs import RECOVERY, VERBS


def verbs_in(group: str) -> tuple[str, ...]:
    """The operator's verbs `t25 --help` lists under `group` (core.domain.verbs)."""
    return tuple(s.words[0] for s in VERBS.values() if s.group == group)


# The top-level help's groups, in the order a newcomer needs them. A command missing here
# is listed under "other commands", so none is ever hidden by omission.
GROUPS: tuple[tuple[str, tuple[str, ...]], ...] = (
    ("getting started", ("init", "demo", "doctor", "completion")),
    ("tasks", ("task", "intake", "run", "logs", "diff", "show", "shell", "cost")),
    ("decisions", verbs_in("decisions")),
    (RECOVERY, (*verbs_in(RECOVERY), "cleanup")),
    ("running T25", ("tui", "serve", "worker", "audit")),
)

# One example per command, shown under its --help (and a few in `t25 --help`).
EXAMPLES: dict[str, str] = {
    "init": "t25 init",
    "demo": "t25 demo --dir /tmp/shop",
    "doctor": "t25 doctor --verbose",
    "completion": "source <(t25 completion bash)",
    "task": 't25 task new "Validate the page size" --type fix',
    "intake": "t25 intake --project shop",
    "run": "t25 run --follow",
    "logs": "t25 logs T-7 --follow",
    "diff": "t25 diff T-7 --stat",
    "show": "t25 show A-12",
    "shell": "t25 shell T-7",
    "cost": "t25 cost --json",
    "cleanup": "t25 cleanup --dry-run",
    "tui": "t25 tui",
    "serve": "t25 serve --bind 0.0.0.0:8725 --workers 2",
    "worker": "t25 worker --url http://factory:8725 --workers 2",
    "audit": "t25 audit verify",
    **{" ".join(spec.words): spec.example for spec in VERBS.values()},
}
STARTER = ("init", "task", "run", "merge")  # the examples `t25 --help` shows

HIDDEN_PREFIX = "__"  # internal commands: run by the completion scripts, never by a person


def example_epilog(name: str) -> str | None:
    """A command's --help epilog: its example."""
    example = EXAMPLES.get(name)
    return f"example:\n  $ {example}" if example else None


class Parser(argparse.ArgumentParser):
    """An ArgumentParser that answers a mistyped choice with the nearest one and never
    names an internal command."""

    def _check_value(self, action: argparse.Action, value: Any) -> None:
        choices = action.choices
        if choices is None or value in choices:
            return
        shown = [str(c) for c in choices if not str(c).startswith(HIDDEN_PREFIX)]
        what = "command" if isinstance(action, argparse._SubParsersAction) else "choice"
        message = f"invalid {what}: {value!r}"
        if near := nearest(str(value), shown):
            message += f"; did you mean {near!r}?"
        if what == "command":
            message += f" (`{self.prog} --help` lists them)"
        else:
            message += f" (choose from {', '.join(map(repr, shown))})"
        raise argparse.ArgumentError(action, message)


def nearest(value: str, choices: Sequence[str]) -> str | None:
    """The choice `value` most likely meant: close in spelling, or a prefix of exactly one."""
    import difflib

    close = difflib.get_close_matches(value, choices, n=1, cutoff=0.6)
    if not close:
        close = difflib.get_close_matches(value.lower(), choices, n=1, cutoff=0.6)
    if close:
        return close[0]
    starting = [c for c in choices if c.startswith(value.lower())]
    return starting[0] if len(starting) == 1 else None


def grouped_help(parser: argparse.ArgumentParser, sub: argparse._SubParsersAction[Any]) -> str:
    """`t25 --help`: description, usage, the commands by group, global options, examples."""
    helps = {a.dest: a.help or "" for a in sub._choices_actions}
    width = max(map(len, helps)) + 2
    import textwrap

    out = [*textwrap.wrap(parser.description or "", 100), ""]
    out.append("usage: t25 [--config PATH] [--actor ACTOR] COMMAND ...")
    listed: set[str] = set()
    groups = [*GROUPS, ("other commands", tuple(n for n in helps if n not in _grouped()))]
    for title, names in groups:
        names = tuple(n for n in names if n in helps)
        if not names:
            continue
        out += ["", f"{title}:"]
        for name in names:
            out.append(f"  {name.ljust(width)}{_first_clause(helps[name])}")
            listed.add(name)
    out += [
        "",
        "options (before or after the command):",
        "  --config PATH  the t25.yaml to use (default: the nearest, up to the repository root)",
        "  --actor ACTOR  who you decide for, recorded beside your OS user and git identity",
        "  --debug        show tracebacks on errors",
        "  --version      print the version of T25",
        "",
        "examples:",
        *(f"  $ {EXAMPLES[name]}" for name in STARTER),
        "",
        *textwrap.wrap(
            "`t25 COMMAND --help` says more, with an example. " + (parser.epilog or ""), 100
        ),
    ]
    return "\n".join(out) + "\n"


def _grouped() -> set[str]:
    return {name for _, names in GROUPS for name in names}


def _first_clause(text: str) -> str:
    """A command's help cut to fit one line of 100 columns."""
    return text if len(text) <= 80 else text[:77].rstrip(" ,;") + "..."
