"""Operator decisions from the command line: every verb of core.domain.verbs builds the
`Decision` the cockpit and the REST API build, and hands it to the control plane's `decide`;
and `t25 cleanup`."""

from __future__ import annotations

import argparse
import re
from typing import TYPE_CHECKING

from core.control.merge_landing import last_landing, merging_line
from core.domain.decisions import Decision
from core.domain.events import DecisionRecorded, WorktreeCleaned
from core.domain.evidence import MergeEvidence
from core.domain.models import Task
from core.domain.states import WORKING
from core.domain.text import printable
from core.domain.verbs import VERBS, Kind, Verb, VerbSpec
from core.errors import InvalidInput
from core.ports import Operations
from t25_tui.cli.context import actor_of, run, run_runtime

if TYPE_CHECKING:
    from t25_tui.runtime import Runtime


def decide(args: argparse.Namespace) -> int:
    """Every verb's command (t25_tui.cli.parser_verbs): the `Decision` its arguments make,
    handed to the control plane; then the task as it is, and what the decision recorded."""
    spec = VERBS[Verb(args.verb)]
    if spec.verb is Verb.MERGE and args.dry_run:
        return merge_dry_run(args)
    decision = decision_of(args, spec)

    async def body(control: Operations) -> None:
        sub = control.bus.subscribe()
        before = await control.last_event_id()
        if decision.verb is Verb.MERGE:
            print(merge_progress(control, await control.task(args.id)), flush=True)
        task = await control.decide(decision)
        if decision.verb is Verb.MERGE and (
            found := last_landing(await control.events(task.id, after=before))
        ):
            print(printable(found.line()))
        said = f"  priority {task.priority}" if decision.changes else ""
        merged = "  merged" if task.merged else ""
        print(f"{task.id}  {task.state}{merged}{said}  {printable(task.title)}")
        while (event := sub.get_nowait()) is not None:
            if isinstance(event, DecisionRecorded) and event.bound_to:
                print(f"  recorded on {event.bound_to}")
            if isinstance(event, WorktreeCleaned):
                print(f"  worktree: {printable(event.reason)}")
        if task.state in WORKING:
            print("  next: t25 run")

    run(args, body)
    return 0


def decision_of(args: argparse.Namespace, spec: VerbSpec) -> Decision:
    """The decision the command line's arguments for `spec` make (`--plan` bare or prefixed)."""
    values = {taken.name: getattr(args, taken.name) for taken in spec.takes}
    if (plan := spec.takes_kind(Kind.PLAN)) and values[plan.name] is not None:
        values[plan.name] = plan_binding(values[plan.name], args.id)
    return Decision.given(spec.verb, args.id, actor_of(args), values)


def merge_progress(control: Operations, task: Task) -> str:
    """The line said while a merge is tried: how many checks run on the merge result, or
    that the forge merges it."""
    return merging_line(task, control.config)


_PLAN_SHA = re.compile(r"(?:sha256:)?([0-9a-f]{64})")


def plan_binding(given: str, task: str) -> str:
    """`--plan`: the plan's SHA-256 as a binding (`sha256:…`), bare or prefixed."""
    found = _PLAN_SHA.fullmatch(given.strip().lower())
    if found is None:
        raise InvalidInput(
            f"--plan: expected the plan's SHA-256 (64 hex digits, or sha256:…), got "
            f"{printable(given)!r}",
            hint=f"t25 task show {task} prints it",
        )
    return f"sha256:{found[1]}"


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
