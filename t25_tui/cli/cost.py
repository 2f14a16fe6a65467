"""`t25 cost`: every run's estimated spend, in total and by role, adapter, model and task."""

from __future__ import annotations

import argparse

from core.domain.text import printable
from core.ports import Operations
from t25_tui.cli.context import run
from t25_tui.cli.shapes import CostJson, CostReport


def cost(args: argparse.Namespace) -> int:
    async def body(control: Operations) -> CostReport:
        total = CostJson.of(await control.cost())
        return CostReport(**total.model_dump(), by_task=await control.cost_by_task())

    report = run(args, body)
    if args.json:
        print(report.text())
        return 0
    tokens = report.usage.input_tokens + report.usage.output_tokens
    print(f"total      ${report.total_usd:.4f}  {report.runs} runs  {tokens} tokens")
    for name, group in (
        ("role", report.by_role),
        ("adapter", report.by_adapter),
        ("model", report.by_model),
        ("task", report.by_task),
    ):
        if group:
            shares = ", ".join(f"{key} ${usd:.4f}" for key, usd in group.items())
            print(f"by {name:<7} {printable(shares)}")  # model names come from the agents
    return 0
