"""The `t25` command line: argument parsing and error reporting.

Only argparse (and `core.config.held_secrets`, os and sys only) is imported at start so
`t25 --help` stays fast; each command imports what it needs. Before anything else, T25's
secrets are taken out of the process's environment (`held_secrets.hold`). A deliberate T25 error prints as one line with a hint and exits 1;
anything unexpected does the same unless `--debug` asks for the traceback.

The global options (`--config`, `--actor`, `--debug`) are accepted before the command
and after it (`t25 approve T-3 --actor alice`); given in both places, the later wins.
"""

from __future__ import annotations

import argparse
import os
import signal
import sys
from collections.abc import Callable, Sequence
from datetime import UTC, datetime
from typing import Any

from t25_tui.cli.help import Parser, example_epilog, grouped_help

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


def _command(name: str) -> Callable[[argparse.Namespace], int]:
    """A handler imported only when its command runs: `module:function` under t25_tui.cli."""
    module, func = name.split(":")

    def run(args: argparse.Namespace) -> int:
        import importlib

        handler: Callable[[argparse.Namespace], int]
        handler = getattr(importlib.import_module(f"t25_tui.cli.{module}"), func)
        return handler(args)

    return run


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
        p.set_defaults(handler=_command(handler), runs_agents=runs_agents)
        return p

    add("init", "setup:init", "create t25.yaml and .factory/ in this git repository")
    demo = add(
        "demo",
        "demo:demo",
        "a guided tour: tasks through the whole pipeline on a sample repository",
    )
    demo.add_argument(
        "--dir",
        metavar="PATH",
        help="create the sample repository here and keep it (default: a throwaway temp directory)",
    )
    demo.add_argument(
        "--tui",
        action="store_true",
        help="open the cockpit on the sample repository with tasks flowing",
    )

    task = sub.add_parser(
        "task",
        help="file, list and inspect tasks",
        description="File, list and inspect tasks.",
        epilog=f"{example_epilog('task')}\n  $ t25 task list --state NEEDS_INPUT",
    )
    task_sub = task.add_subparsers(dest="task_command", metavar="SUBCOMMAND", required=True)
    new = task_sub.add_parser("new", help="file a new task", description="File a new task.")
    new.add_argument("title", help="what should change, in a sentence")
    new.add_argument(
        "--type",
        choices=TASK_TYPES,
        default="feat",
        help="kind of change; names the branch (default: feat)",
    )
    new.add_argument("--description", default="", help="more detail for the agents")
    new.add_argument("--project", help="project from t25.yaml (default: the first)")
    new.add_argument(
        "--priority",
        type=int,
        default=0,
        metavar="N",
        help="-100 to 100; the queue takes higher first, then older (default: 0)",
    )
    new.add_argument(
        "--after",
        action="append",
        default=[],
        metavar="ID",
        help="start only once this task is merged (repeatable)",
    )
    new.set_defaults(handler=_command("tasks:new"))
    edit = task_sub.add_parser(
        "edit",
        help="change a task's title, description, type or priority",
        description="Change a task's title or description (until it implements), its type "
        "(before its first run) or its priority (until it is finished). Audited.",
    )
    edit.add_argument("id", help="task id, e.g. T-7 or 7")
    edit.add_argument("--title", help="the new title")
    edit.add_argument("--description", help="the new description")
    edit.add_argument("--type", choices=TASK_TYPES, help="the new type (names the branch)")
    edit.add_argument("--priority", type=int, metavar="N", help="the new priority, -100 to 100")
    edit.add_argument("--reason", default="", help="why (kept in the audit log)")
    edit.set_defaults(handler=_command("tasks:edit"))
    lst = task_sub.add_parser("list", help="list tasks", description="List tasks.")
    lst.add_argument(
        "--state",
        choices=STATES,
        type=str.upper,
        action="append",
        help="only tasks in this state (repeatable)",
    )
    lst.add_argument("--project", help="only this project's tasks")
    lst.add_argument("--all", action="store_true", help="include archived tasks")
    _json_option(lst)
    lst.set_defaults(handler=_command("task_list:list_"))
    show = task_sub.add_parser(
        "show",
        help="a task's history, runs, artifacts and cost",
        description="Show a task's history, runs, artifacts and cost.",
    )
    show.add_argument("id", help="task id, e.g. T-7 or 7")
    _json_option(show)
    show.set_defaults(handler=_command("tasks:show"))

    for name, verb in (
        ("cancel", "stop a task and its runs"),
        ("retry", "send a FAILED task back to the stage that failed; --reason goes to the agent"),
        ("archive", "hide a finished, failed or cancelled task from the board"),
        ("recheck", "send a DONE task that is not merged through QA and review again"),
    ):
        p = add(name, f"decisions:{name}", verb)
        p.add_argument("id", help="task id, e.g. T-7 or 7")
        p.add_argument("--reason", default="", help="why (kept in the audit log)")
    reset = add(
        "reset",
        "decisions:reset",
        "send a task back to a stage it passed, its branch to where that stage began",
    )
    reset.add_argument("id", help="task id, e.g. T-7 or 7")
    reset.add_argument(
        "--to",
        required=True,
        type=str.upper,
        choices=WORKING_STAGES,
        metavar="STAGE",
        help="the stage to go back to: " + ", ".join(WORKING_STAGES),
    )
    reset.add_argument(
        "--reason", default="", help="why (kept in the audit log; the agent reads it)"
    )

    clean = add(
        "cleanup",
        "decisions:cleanup",
        "remove the worktrees of merged, archived or landed tasks that a merge or archive kept",
    )
    clean.add_argument("id", nargs="?", help="only this task (default: every task)")
    clean.add_argument(
        "--dry-run", action="store_true", help="say which worktrees would go; remove none"
    )

    run = add(
        "run", "run:run_", "work the queue until nothing can move without a human", runs_agents=True
    )
    run.add_argument(
        "--follow",
        action="store_true",
        help="keep going, picking up new tasks and decisions, until interrupted",
    )
    run.add_argument(
        "--workers",
        type=int,
        metavar="N",
        help="runs at once (default: limits.workers in t25.yaml)",
    )
    p = add("approve", "decisions:approve", "approve the plan a task is waiting on")
    p.add_argument("id", help="task id, e.g. T-7 or 7")
    p.add_argument("--comment", help="a note kept in the audit log")
    p.add_argument(
        "--plan",
        metavar="SHA",
        help="the SHA-256 of the plan you read (t25 task show); refused if the plan has "
        "changed since. Default: the current plan, printed",
    )
    p = add("reject", "decisions:reject", "send a plan back to PLAN with the reason")
    p.add_argument("id", help="task id, e.g. T-7 or 7")
    p.add_argument("--reason", required=True, help="what is wrong; the planner reads it")
    p = add("answer", "decisions:answer", "answer the question of a NEEDS_INPUT task")
    p.add_argument("id", help="task id, e.g. T-7 or 7")
    p.add_argument("text", help="the answer; the agent reads it")
    p = add(
        "merge",
        "decisions:merge",
        "merge a DONE task's branch into the default branch (after checks and review)",
    )
    p.add_argument("id", help="task id, e.g. T-7 or 7")
    p.add_argument("--reason", default="", help="a note kept in the audit log")
    p.add_argument(
        "--allow-path",
        action="append",
        metavar="PATH",
        help="a protected path the change touches (policies.protected_paths), named to "
        "merge it anyway; repeat for each (t25 task show lists them)",
    )
    p.add_argument(
        "--dry-run",
        action="store_true",
        help="show what the merge would take (commits, diff stat, checks, review, protected "
        "paths, the reviewed head) and whether it would be refused; merge nothing",
    )
    _json_option(p)
    p = add(
        "acknowledge",
        "decisions:acknowledge",
        "acknowledge what a run changed outside its worktree (retry and merge wait for it)",
    )
    p.add_argument("id", help="task id, e.g. T-7 or 7")
    p.add_argument("--reason", required=True, help="what you checked (kept in the audit log)")
    p = add(
        "shell",
        "workspace:shell",
        "open $SHELL in a task's worktree (exit it to come back), or $EDITOR with --editor",
    )
    p.add_argument("id", help="task id, e.g. T-7 or 7")
    p.add_argument("--editor", action="store_true", help="open $VISUAL or $EDITOR there instead")
    p = add("logs", "logs:logs", "agent output of a task's runs, or of one run, as readable text")
    p.add_argument("ref", metavar="TASK|RUN", help="a task id (T-7) or a run id (R-12)")
    p.add_argument("--follow", "-f", action="store_true", help="keep printing as output arrives")
    shown_as = p.add_mutually_exclusive_group()
    shown_as.add_argument(
        "--raw",
        action="store_true",
        help="the CLIs' output as they printed it (JSON events): byte-exact when piped; on a "
        "terminal every control character but newline and tab is shown escaped (\\x1b), so "
        "no escape sequence an agent printed (clipboard, title, tmux passthrough) acts on it",
    )
    shown_as.add_argument(
        "--log",
        action="store_true",
        help="a finished run's log artifact instead: byte-exact as stored when piped, "
        "escaped as --raw on a terminal",
    )
    shown_as.add_argument(
        "--json",
        action="store_true",
        help="the readable lines as JSON Lines: run_id, kind, stream, line, at",
    )
    p = add(
        "diff",
        "diff:diff",
        "a task's change against the default branch, or one implementing attempt's",
    )
    p.add_argument("id", help="task id, e.g. T-7 or 7")
    p.add_argument(
        "--attempt",
        type=int,
        metavar="N",
        help="only what implementing attempt N changed (1 the first; t25 task show lists runs)",
    )
    p.add_argument("--stat", action="store_true", help="files and lines changed, not the diff")
    p.add_argument("--json", action="store_true", help="the stat as one JSON object")
    p = add("show", "diff:show", "print an artifact's content, verified against its SHA-256")
    p.add_argument("id", help="artifact id, e.g. A-12 (t25 task show lists them)")

    p = add(
        "serve",
        "serve:serve",
        "the control plane over REST and SSE, for remote workers",
        runs_agents=True,
    )
    p.add_argument(
        "--bind",
        metavar="HOST:PORT",
        help="address to listen on (default: serve.bind in t25.yaml, loopback)",
    )
    p.add_argument(
        "--workers",
        type=int,
        default=0,
        metavar="N",
        help="also run N workers in this process (default: 0, remote workers only)",
    )
    p.add_argument(
        "--store-patience",
        type=float,
        default=300.0,
        metavar="S",
        help="give up (exit 1) when the store stays unavailable this long (default: 300)",
    )
    p = add(
        "worker",
        "serve:worker",
        "work runs leased from a `t25 serve` control plane, in this host's repositories",
        runs_agents=True,
    )
    p.add_argument(
        "--url",
        action="append",
        required=True,
        metavar="URL",
        help="the control plane, e.g. http://10.0.0.5:8725; repeated, serve replicas on one "
        "Postgres to fail over between, in order (worktrees belong to the first)",
    )
    p.add_argument("--workers", type=int, default=1, metavar="N", help="runs at once (default: 1)")
    p.add_argument(
        "--lease-ttl",
        type=float,
        default=30.0,
        metavar="S",
        help="seconds a claim lasts without a heartbeat (default: 30)",
    )
    p.add_argument(
        "--heartbeat",
        type=float,
        default=5.0,
        metavar="S",
        help="seconds between heartbeats (default: 5)",
    )

    tui = add(
        "tui",
        "tui:tui",
        "the cockpit: a full-screen board, logs, approvals, cost and audit",
        runs_agents=True,
    )
    tui.add_argument(
        "--workers",
        type=int,
        metavar="N",
        help="in-process workers (default: limits.workers in t25.yaml)",
    )
    tui.add_argument(
        "--no-workers",
        action="store_true",
        help="only watch and decide; another process works the queue",
    )
    tui.add_argument(
        "--serve",
        nargs="?",
        const="",
        metavar="HOST:PORT",
        help="also serve the REST/SSE control plane, so remote workers can attach "
        "(default address: serve.bind in t25.yaml)",
    )
    tui.add_argument(
        "--web",
        nargs="?",
        const="127.0.0.1:4173",
        metavar="HOST:PORT",
        help="serve the cockpit to browsers instead (default address: 127.0.0.1:4173), "
        "behind the operator's token; loopback unless T25_OPERATOR_TOKEN(S) is set",
    )
    tui.add_argument(
        "--url",
        action="append",
        metavar="URL",
        help="attach to the `t25 serve` at URL instead (e.g. http://factory:8725): "
        "no local t25.yaml or store; the token comes from --token-file, "
        "T25_OPERATOR_TOKEN_FILE or T25_OPERATOR_TOKEN, else from the .factory/operator-token "
        "a serve of this checkout made; repeated, serve replicas to fail over between",
    )
    tui.add_argument(
        "--token-file",
        type=str,
        metavar="PATH",
        help="with --url: the file that holds your operator token (nothing typed on a "
        "command line, where a shell's history would keep it)",
    )

    p = add(
        "doctor",
        "doctor:doctor",
        "check every configured agent CLI (found, version, capabilities, login), git, the "
        "sandbox, the store and t25.yaml; exit 1 when T25 could not work as configured",
    )
    _json_option(p)
    p.add_argument(
        "--verbose",
        "-v",
        action="store_true",
        help="also the wide tables: every CLI's capabilities and flags, each role's network "
        "reach and tools",
    )
    p = add(
        "completion",
        "completion:completion",
        "print a shell completion script (commands, options, task ids): "
        "source <(t25 completion bash)",
    )
    p.add_argument("shell", choices=("bash", "zsh", "fish"))
    # Hidden (no help): what the completion scripts run to list task ids.
    sub.add_parser("__complete-ids", add_help=False).set_defaults(
        handler=_command("completion:ids")
    )
    p = add("cost", "cost:cost", "estimated spend: in total, and by role, adapter, model and task")
    _json_option(p)
    audit = add("audit", "audit:show", "the audit log of operator decisions")
    audit.add_argument("--task", help="only this task's decisions")
    _json_option(audit)
    audit_sub = audit.add_subparsers(dest="audit_command", metavar="SUBCOMMAND")
    verify = audit_sub.add_parser(
        "verify",
        help="check the log's chain and T25's seals, and each task's row against its history",
        description="Check the audit log's hash chain against the store's anchor and each "
        "line's seal (T25's key), and each task's row against its sealed history; exit 1 and "
        "name the first bad line, or each task whose records T25 did not write.",
    )
    verify.add_argument(
        "--against",
        nargs="+",
        metavar="SEQ:HASH",
        help="also check that line SEQ of the chain still has HASH: a head `t25 audit "
        "checkpoint` printed and you kept outside T25 (catches a rewrite of both the log "
        "and the store)",
    )
    verify.set_defaults(handler=_command("audit:verify"))
    export = audit_sub.add_parser(
        "export",
        help="write the audit log to standard output, for an auditor",
        description="Write the audit log to standard output, oldest line first: jsonl "
        "(each line exactly as hashed, so it verifies on its own) or csv.",
    )
    export.add_argument("--format", choices=("jsonl", "csv"), default="jsonl")
    export.add_argument(
        "--since",
        type=_since,
        metavar="TIME|SEQ",
        help="only the lines from this time (ISO 8601, UTC unless it says) or this "
        "sequence number on",
    )
    export.set_defaults(handler=_command("audit:export"))
    checkpoint = audit_sub.add_parser(
        "checkpoint",
        help="print the chain's head (SEQ HASH) to keep outside T25",
        description="Verify the chain, then print its head: the last line's sequence "
        "number and hash. Keep it outside T25; `t25 audit verify --against` checks it later.",
    )
    checkpoint.add_argument("--json", action="store_true", help="as a JSON object")
    checkpoint.set_defaults(handler=_command("audit:checkpoint"))
    rotate = audit_sub.add_parser(
        "rotate-key",
        help="add a new sealing key; what the old ones sealed still verifies",
        description="Add a new key to T25's keyring (audit.key_file, .factory/audit.key by "
        "default): every line and state change from now on is sealed with it; the old keys "
        "stay, to verify what they sealed. Back the key file up with the store.",
    )
    rotate.set_defaults(handler=_command("audit:rotate_key"))
    return parser


def _json_option(parser: argparse.ArgumentParser) -> None:
    """`--json`: one JSON object instead of text, of the shape t25_tui.cli.shapes documents."""
    parser.add_argument(
        "--json", action="store_true", help="print one JSON object (docs/guides/command-line.md)"
    )


def _since(text: str) -> int | datetime:
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


# A reader that goes away (`t25 task list | head -1`) ends T25 the way it ends `cat`: no
# traceback, and exit status 141 (128 + SIGPIPE), which is what a shell reports for a tool
# the signal killed. T25 exits by itself rather than dying of the signal, so `t25 run`
# first stops its agents and hands their runs back.
BROKEN_PIPE_EXIT = 128 + signal.SIGPIPE


def main(argv: Sequence[str] | None = None) -> int:
    from core.config import held_secrets  # os and sys only: --help stays fast

    if argv is None:  # the real command line, not a call from a test or a script
        held_secrets.hold()  # may execute T25 again, its secrets out of the environment
    parser = build_parser()
    args = parser.parse_args(argv)
    if not getattr(args, "handler", None):
        parser.print_help()
        return 2
    try:
        if getattr(args, "runs_agents", False):
            from adapters.base import sweep_prompt_files

            held_secrets.undumpable()  # no agent may read or ptrace the process that runs it

            sweep_prompt_files()
        code: int = args.handler(args)
        sys.stdout.flush()  # here, not at exit: a reader that went away is seen below
        return code
    except KeyboardInterrupt:
        print("t25: interrupted", file=sys.stderr)
        return 130
    except BrokenPipeError:
        if not _stdout_reader_gone():
            raise  # a socket or a child's pipe, not the terminal's reader: a real error
        # Python flushes stdout once more on the way out; /dev/null in its place lets that
        # flush succeed (the recipe of the `signal` module's documentation).
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        return BROKEN_PIPE_EXIT
    except Exception as exc:
        if args.debug:
            raise
        from core.domain.text import printable
        from core.errors import T25Error

        if isinstance(exc, T25Error):
            print(f"t25: error: {printable(exc.message)}", file=sys.stderr)
            if exc.hint:
                print(f"  hint: {printable(exc.hint)}", file=sys.stderr)
            return 1
        print(
            f"t25: unexpected error: {type(exc).__name__}: {printable(str(exc))}", file=sys.stderr
        )
        print("  hint: run again with --debug for the traceback", file=sys.stderr)
        return 1


def _stdout_reader_gone() -> bool:
    """stdout is a pipe whose reading end is closed (poll reports an error on it)."""
    import select

    try:
        poller = select.poll()
        poller.register(sys.stdout.fileno(), select.POLLOUT)
        return any(events & select.POLLERR for _, events in poller.poll(0))
    except (OSError, ValueError):
        return False


if __name__ == "__main__":
    sys.exit(main())
