"""`t25 audit` and `t25 audit verify`."""

from __future__ import annotations

import argparse
import sys

from core.models import task_id
from core.service import Factory
from t25_tui.commands.context import run


def show(args: argparse.Namespace) -> int:
    async def body(factory: Factory) -> None:
        entries = factory.audit.entries(task=task_id(args.task) if args.task else None)
        if not entries:
            print("no decisions recorded" + (f" for {task_id(args.task)}" if args.task else ""))
        for e in entries:
            reason = f"  — {e.reason}" if e.reason else ""
            print(f"{e.seq:>5}  {e.ts:%Y-%m-%d %H:%M:%S}  {e.decision:<8} {e.task or '-':<7} "
                  f"{e.actor}{reason}")

    run(args, body)
    return 0


def verify(args: argparse.Namespace) -> int:
    async def body(factory: Factory) -> bool:
        verdict = await factory.audit.verify()
        stream = sys.stdout if verdict.ok else sys.stderr
        print(f"{'ok' if verdict.ok else 'TAMPERED'}: {factory.audit.path}: {verdict.message}",
              file=stream)
        return verdict.ok

    return 0 if run(args, body) else 1
