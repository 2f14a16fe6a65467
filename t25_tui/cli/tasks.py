"""`t25 task new|list|show`; `list` and `show` print JSON with `--json` (`shapes`).

Everything these print that came from outside T25 (titles, descriptions, reasons, actors,
errors) goes through `core.domain.text.printable`: text stored before the door checked it may
still hold escape sequences, and they must not reach the operator's terminal.
"""

from __future__ import annotations

import argparse
import shlex
import sys

from core.domain.check_text import failing_checks
from core.domain.detail import TaskDetail
from core.domain.events import TaskTransitioned
from core.domain.models import Artifact, ArtifactKind, Run, Task, TaskState, TaskType
from core.domain.text import printable
from core.ports import Operations
from t25_tui.cli.context import actor_of, run
from t25_tui.cli.cost import stage_lines
from t25_tui.cli.task_list import age

# `t25 task show` exits with this when an artifact's content no longer matches its
# SHA-256: the task is shown in full, with a warning on each such artifact.
CORRUPTED_EXIT = 1
_COUNTED = (ArtifactKind.PROMPT, ArtifactKind.LOG)  # listed only as a count


def new(args: argparse.Namespace) -> int:
    async def body(control: Operations) -> None:
        task = await control.new_task(
            args.title,
            actor=actor_of(args),
            type=TaskType(args.type),
            description=args.description,
            project=args.project,
            priority=args.priority,
            after=args.after,
        )
        print(f"{task.id}  {task.state}  {task.branch}  {printable(task.title)}")
        if task.after:
            print(
                f"  starts once {', '.join(task.after)} {'is' if len(task.after) == 1 else 'are'} merged"
            )

    run(args, body)
    return 0


def show(args: argparse.Namespace) -> int:
    async def body(control: Operations) -> bool:
        detail = await control.detail(args.id, verify=True)
        if args.json:
            from t25_tui.cli.shapes import TaskShow  # pydantic shapes: only for --json

            print(TaskShow.of(detail).text())
        else:
            _text(detail)
            if detail.task.state is TaskState.AWAITING_APPROVAL:
                found = await control.approval_evidence(detail.task.id)
                for line in found.lines(detail.task.id):
                    print(line)
        if detail.damaged:
            sys.stdout.flush()
            print(
                f"t25: warning: {len(detail.damaged)} of {detail.task.id}'s artifacts no longer "
                f"match their SHA-256\n  hint: {detail.damaged[0].hint}",
                file=sys.stderr,
            )
        return not detail.damaged

    return 0 if run(args, body) else CORRUPTED_EXIT


def _text(detail: TaskDetail) -> None:
    _head(detail.task)
    _history(detail)
    _runs(detail)
    _checks(detail)
    _network(detail)
    _artifacts(detail)
    roles = ", ".join(f"{role} ${usd:.4f}" for role, usd in sorted(detail.cost.by_role.items()))
    print(f"cost     ${detail.cost.total_usd:.4f}" + (f"  ({roles})" if roles else ""))
    for line in stage_lines(detail.cost.by_stage):
        print(line)
    print(f"spend    {detail.spend.line()}" + ("  BUDGET REACHED" if detail.spend.reached else ""))


def _head(task: Task) -> None:
    print(f"{task.id}  {printable(task.title)}")
    print(
        f"  state    {task.state}{'  (archived)' if task.archived else ''}"
        f"  for {age(task.state_since)}"
    )
    print(f"  type     {task.type}   branch {task.branch}   project {task.project}")
    if task.description:
        about = printable(task.description.strip(), multiline=True)
        print(f"  about    {about.replace(chr(10), chr(10) + ' ' * 11)}")
    if task.error:
        print(f"  error    {printable(task.error)}")
    if task.violation:
        print(f'  held     until acknowledged: t25 acknowledge {task.id} --reason "…"')
    if task.protected_paths:
        print(f"  protected paths touched (policies.protected_paths): {len(task.protected_paths)}")
        for path in task.protected_paths:
            print(f"           {printable(path)}")
        if not task.merged:
            named = " ".join(
                f"--allow-path {shlex.quote(printable(p))}" for p in task.protected_paths
            )
            print(f"  merge    names each: t25 merge {task.id} {named}")


def _history(detail: TaskDetail) -> None:
    print("history")
    for event in detail.history:
        if isinstance(event, TaskTransitioned):
            why = f"  — {printable(event.reason)}" if event.reason else ""
            print(
                f"  {event.at:%Y-%m-%d %H:%M:%S}  {event.from_state} → {event.to_state}"
                f"  by {printable(event.actor)}{why}"
            )


def _runs(detail: TaskDetail) -> None:
    runs = detail.runs
    print("runs" if runs else "runs     none yet")
    width = max((len(r.id) for r in runs), default=0)
    for r in runs:
        tokens = r.usage.input_tokens + r.usage.output_tokens
        print(
            f"  {r.id:<{width}}  {r.stage:<12} {r.role:<9} {r.status:<9} "
            f"{r.adapter or '-':<10} {printable(r.model or '-'):<14} {tokens:>7} tok  "
            f"${r.cost_usd:.4f}" + (f"  {printable(r.error)}" if r.error else "")
        )
        passed_over = r.adapter_reason and not r.adapter_reason.endswith("first in the chain")
        if r.stage is TaskState.REVIEW and passed_over:  # who was passed over, and why
            print(f"  {'':<{width}}  adapter: {printable(r.adapter_reason or '')}")
        if r.session_id or r.resumed_session:
            print(f"  {'':<{width}}  {_session(r)}")


def _checks(detail: TaskDetail) -> None:
    """The last QA's checks, with what a runner T25 knows reported beside the default
    branch's figures."""
    if not detail.checks:
        return
    print("checks   (the last QA's)")
    for check in detail.checks:
        state = check.outcome(detail.baseline)
        print(f"  {printable(check.name)}: {state}" + ("" if check.required else " (optional)"))
    failing = failing_checks(detail.checks)
    if failing:
        print("failing  (the last lines of each)")
        for line in failing:
            print(f"  {line}")


def _network(detail: TaskDetail) -> None:
    """What the runs asked of the network through T25's proxy: refusals first."""
    if not detail.network:
        return
    print("network  (each run's connections through T25's proxy)")
    width = max(len(t.run_id) for t in detail.network)
    for t in detail.network:
        print(f"  {t.run_id:<{width}}  {printable(t.line())}")


def _session(run: Run) -> str:
    """The agent CLI's session of a run, and the one it continued (a send-back's dev run)."""
    line = f"session: {printable(run.session_id or '-')}"
    if run.resumed_session:
        line += f" (continued {printable(run.resumed_session)})"
    return line


def _artifacts(detail: TaskDetail) -> None:
    """Prompts and logs are counted, not listed, unless one of them is damaged."""
    artifacts, damaged = detail.artifacts, {d.id: d for d in detail.damaged}
    shown = [a for a in artifacts if a.id in damaged or a.meta.kind not in _COUNTED]
    print("artifacts" if artifacts else "artifacts none yet")
    width = max((len(a.id) for a in shown), default=0)
    for a in shown:
        print(_artifact_line(a, width))
        if a.id in damaged:
            print(f"  {'':<{width}}  warning: {damaged[a.id].error}")
    if len(shown) < len(artifacts):
        print(f"  + {len(artifacts) - len(shown)} prompts and logs (t25 logs {detail.task.id})")


def _artifact_line(a: Artifact, width: int) -> str:
    return (
        f"  {a.id:<{width}}  {a.meta.kind:<9} {a.size:>7} B  sha256:{a.sha256[:12]}  "
        f"from {a.meta.run_id or '-'} ({a.meta.role or '-'})"
    )
