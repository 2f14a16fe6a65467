"""`t25 audit` and `t25 audit verify`."""

from __future__ import annotations

import argparse
import sys

from core.control.audit import VOID, log_path
from core.domain.models import task_id
from core.domain.text import printable
from core.ports import Operations
from t25_tui.cli.context import run


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
        verdict = (await control.audit_trail()).verdict
        stream = sys.stdout if verdict.ok else sys.stderr
        where = log_path(control.config.root)
        print(f"{'ok' if verdict.ok else 'TAMPERED'}: {where}: {verdict.message}", file=stream)
        return verdict.ok

    return 0 if run(args, body) else 1
