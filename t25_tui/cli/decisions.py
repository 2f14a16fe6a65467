"""Operator decisions from the command line: cancel, retry, archive, recheck, approve, reject,
answer, merge, acknowledge, reset. Each builds the `Decision` the cockpit and the REST API build, and hands it
to the control plane's `decide`."""

from __future__ import annotations

import argparse
import re
from typing import TYPE_CHECKING

from core.control.merge_landing import last_landing, merging_line
from core.domain.decisions import Decision, Verb
from core.domain.events import DecisionRecorded, WorktreeCleaned
from core.domain.evidence import MergeEvidence
from core.domain.models import Task, TaskState
from core.domain.states import WORKING
from core.domain.text import printable
from core.errors import InvalidInput
from core.ports import Operations
from t25_tui.cli.context import actor_of, run, run_runtime

if TYPE_CHECKING:
    from t25_tui.runtime import Runtime


def _decide(
    args: argparse.Namespace,
    verb: Verb,
    text: str,
    *,
    bound_to: str | None = None,
    allow_paths: tuple[str, ...] = (),
    stage: TaskState | None = None,
) -> int:
    async def body(control: Operations) -> None:
        sub = control.bus.subscribe()
        decision = Decision(
            verb=verb,
            task=args.id,
            actor=actor_of(args),
            text=text,
            bound_to=bound_to,
            allow_paths=allow_paths,
            stage=stage,
        )
        before = await control.last_event_id()
        if verb is Verb.MERGE:
            print(merge_progress(control, await control.task(args.id)), flush=True)
        task = await control.decide(decision)
        if verb is Verb.MERGE and (
            found := last_landing(await control.events(task.id, after=before))
        ):
            print(printable(found.line()))
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


def merge_progress(control: Operations, task: Task) -> str:
    """The line said while a merge is tried: how many checks run on the merge result."""
    return merging_line(task, len(control.config.for_project(task.project).qa.checks))


_PLAN_SHA = re.compile(r"(?:sha256:)?([0-9a-f]{64})")


def approve(args: argparse.Namespace) -> int:
    bound_to = None
    if args.plan is not None:
        found = _PLAN_SHA.fullmatch(args.plan.strip().lower())
        if found is None:
            raise InvalidInput(
                f"--plan: expected the plan's SHA-256 (64 hex digits, or sha256:…), got "
                f"{printable(args.plan)!r}",
                hint=f"t25 task show {args.id} prints it",
            )
        bound_to = f"sha256:{found[1]}"
    return _decide(args, Verb.APPROVE, args.comment or "", bound_to=bound_to)


def reject(args: argparse.Namespace) -> int:
    return _decide(args, Verb.REJECT, args.reason)


def answer(args: argparse.Namespace) -> int:
    return _decide(args, Verb.ANSWER, args.text)


def merge(args: argparse.Namespace) -> int:
    if args.dry_run:
        return merge_dry_run(args)
    return _decide(args, Verb.MERGE, args.reason, allow_paths=tuple(args.allow_path or ()))


def merge_dry_run(args: argparse.Namespace) -> int:
    """What `t25 merge ID` would take, and whether it would be refused (exit 1)."""

    async def body(control: Operations) -> MergeEvidence:
        return await control.merge_evidence(args.id)

    found = run(args, body)
    if args.json:
        print(found.model_dump_json(indent=2))
    else:
        for line in found.lines():
            print(line)
    return 0 if found.refusal is None else 1


def cancel(args: argparse.Namespace) -> int:
    return _decide(args, Verb.CANCEL, args.reason)


def retry(args: argparse.Namespace) -> int:
    return _decide(args, Verb.RETRY, args.reason)


def archive(args: argparse.Namespace) -> int:
    return _decide(args, Verb.ARCHIVE, args.reason)


def recheck(args: argparse.Namespace) -> int:
    return _decide(args, Verb.RECHECK, args.reason)


def acknowledge(args: argparse.Namespace) -> int:
    return _decide(args, Verb.ACKNOWLEDGE, args.reason)


def reset(args: argparse.Namespace) -> int:
    return _decide(args, Verb.RESET, args.reason, stage=TaskState(args.to))


def cleanup(args: argparse.Namespace) -> int:
    """Remove the worktrees that may go (core.control.cleanup); exit 1 when one was kept (in
    a dry run: would be)."""
    from core.control.cleanup import clean_up

    async def body(runtime: Runtime) -> int:
        lines = await clean_up(runtime.control, args.id, dry_run=args.dry_run)
        if not lines:
            print("nothing to clean up" + (f" for {args.id}" if args.id else ""))
        for line in lines:
            print(f"{line.task.id}  {printable(line.why)}: {printable(line.said)}")
        return 1 if any(not line.removed for line in lines) else 0

    return run_runtime(args, body)
