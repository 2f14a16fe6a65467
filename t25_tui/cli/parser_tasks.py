"""The command line's commands that file tasks and decide on them: task, the operator's verbs
(built from their rows: t25_tui.cli.parser_verbs), cleanup, run, shell."""

from __future__ import annotations

import argparse
from typing import Any

from core.domain.verbs import RECOVERY, Verb
from t25_tui.cli.help import example_epilog
from t25_tui.cli.parser_common import (
    STATES,
    TASK_TYPES,
    AddCommand,
    command,
    json_option,
    positive_int,
)
from t25_tui.cli.parser_verbs import sub_verb, verb_commands


def task_commands(sub: argparse._SubParsersAction[Any], add: AddCommand) -> None:
    """Task: file, edit, list and show tasks."""
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
    new.set_defaults(handler=command("tasks:new"))
    _task_reads_and_edits(task_sub)
    intake = add(
        "intake",
        "intake:intake",
        "file a task per issue of the tracker a project's `intake` names, once",
    )
    intake.add_argument("--project", help="this project's intake only (default: every one)")


def recovery_commands(sub: argparse._SubParsersAction[Any], add: AddCommand) -> None:
    """The verbs for when a task goes wrong, cleanup, and run."""
    verb_commands(add, RECOVERY)
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


def decision_commands(sub: argparse._SubParsersAction[Any], add: AddCommand) -> None:
    """The decisions, and the worktree."""
    verb_commands(add, "decisions")
    p = add(
        "shell",
        "workspace:shell",
        "open $SHELL in a task's worktree (exit it to come back), or $EDITOR with --editor",
    )
    p.add_argument("id", help="task id, e.g. T-7 or 7")
    p.add_argument("--editor", action="store_true", help="open $VISUAL or $EDITOR there instead")


def _task_reads_and_edits(task_sub: argparse._SubParsersAction[Any]) -> None:
    """task edit, task list, task show."""
    sub_verb(task_sub, Verb.EDIT)
    lst = task_sub.add_parser("list", help="list tasks", description="List tasks.")
    lst.add_argument(
        "--state",
        choices=STATES,
        type=str.upper,
        action="append",
        help="only tasks in this state (repeatable)",
    )
    lst.add_argument("--project", help="only this project's tasks")
    lst.add_argument(
        "--all", action="store_true", help="every task, the finished and archived ones too"
    )
    lst.add_argument("--after", metavar="ID", help="the tasks filed after this one")
    lst.add_argument(
        "--limit",
        type=positive_int,
        metavar="N",
        help="at most N tasks (with --json: 1000 unless given); says where the next page starts",
    )
    json_option(lst)
    lst.set_defaults(handler=command("task_list:list_"))
    show = task_sub.add_parser(
        "show",
        help="a task's history, runs, artifacts and cost",
        description="Show a task's history, runs, artifacts and cost.",
    )
    show.add_argument("id", help="task id, e.g. T-7 or 7")
    json_option(show)
    show.set_defaults(handler=command("tasks:show"))
