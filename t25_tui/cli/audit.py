"""`t25 audit` and `t25 audit verify`."""

from __future__ import annotations

import argparse
import sys

from core.control.audit import VOID, cross_check, log_path
from core.domain.events import DecisionRecorded
from core.domain.models import task_id
from core.domain.text import printable
from core.ports import Operations
from t25_tui.cli.context import run

PAGE = 5000  # events per read: the most serve gives at once


def show(args: argparse.Namespace) -> int:
    async def body(control: Operations) -> None:
        everything = (await control.audit_trail()).entries
        voided = {e.voids: e.seq for e in everything if e.decision == VOID and e.voids}
        wanted = task_id(args.task) if args.task else None
        entries = [e for e in everything if wanted is None or e.task == wanted]
        if not entries:
            print("no decisions recorded" + (f" for {wanted}" if wanted else ""))
        for e in entries:
            parts = [
                (
                    f"{e.seq:>5}  {e.ts:%Y-%m-%d %H:%M:%S}  {e.decision:<8} {e.task or '-':<7} "
                    f"{printable(e.actor)}"
                )
            ]
            if e.bound_to:
                parts.append(f"on {printable(e.bound_to)}")
            if e.reason:
                parts.append(f"— {printable(e.reason)}")
            if e.seq in voided:
                parts.append(f"[did not take effect: see line {voided[e.seq]}]")
            print("  ".join(parts))

    run(args, body)
    return 0


def verify(args: argparse.Namespace) -> int:
    async def body(control: Operations) -> bool:
        trail = await control.audit_trail()
        verdict = trail.verdict
        stream = sys.stdout if verdict.ok else sys.stderr
        where = log_path(control.config.root)
        print(f"{'ok' if verdict.ok else 'TAMPERED'}: {where}: {verdict.message}", file=stream)
        if not verdict.ok:
            return False
        problems = cross_check(list(trail.entries), await _recorded(control))
        for problem in problems:
            print(f"MISMATCH: {problem}", file=sys.stderr)
        return not problems

    return 0 if run(args, body) else 1


async def _recorded(control: Operations) -> list[DecisionRecorded]:
    """Every decision the store says took effect, on every task, archived ones included."""
    tasks = [*await control.tasks(), *await control.tasks(archived=True)]
    found: list[DecisionRecorded] = []
    for task in {t.id: t for t in tasks}.values():
        after = 0
        while events := await control.events(task.id, after=after, limit=PAGE):
            found += [e for e in events if isinstance(e, DecisionRecorded)]
            after = events[-1].id or after
            if len(events) < PAGE:
                break
    return found
