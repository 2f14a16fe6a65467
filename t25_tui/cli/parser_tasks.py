"""The command line's commands that file tasks and decide on them: task, cancel, retry,
archive, recheck, reset, cleanup, run, approve, reject, answer, merge, acknowledge."""

from __future__ import annotations

import argparse
from typing import Any

from t25_tui.cli.help import example_epilog
from t25_tui.cli.parser_common import (
    STATES,
    TASK_TYPES,
    WORKING_STAGES,
    AddCommand,
    command,
    json_option,
)


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


def recovery_commands(sub: argparse._SubParsersAction[Any], add: AddCommand) -> None:
    """Cancel, retry, archive, recheck, reset, cleanup, and run."""
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


def decision_commands(sub: argparse._SubParsersAction[Any], add: AddCommand) -> None:
    """Approve, reject, answer, merge, acknowledge, and the worktree."""
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
    json_option(p)
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


def _task_reads_and_edits(task_sub: argparse._SubParsersAction[Any]) -> None:
    """task edit, task list, task show."""
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
    edit.set_defaults(handler=command("tasks:edit"))
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
