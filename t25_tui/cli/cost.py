"""`t25 cost`: every run's estimated spend, in total and by role, adapter, model and task."""

from __future__ import annotations

import argparse
from collections.abc import Mapping
from typing import TYPE_CHECKING

from core.domain.cost import StageTokens
from core.domain.text import printable
from core.ports import Operations
from t25_tui.cli.context import run

if TYPE_CHECKING:  # `t25 task show` prints stage lines too, and needs no `--json` shape
    from t25_tui.cli.shapes import CostReport, StageTokensJson


def cost(args: argparse.Namespace) -> int:
    from t25_tui.cli.shapes import CostJson, CostReport

    async def body(control: Operations) -> CostReport:
        total = CostJson.of(await control.cost())
        return CostReport(**total.model_dump(), by_task=await control.cost_by_task())

    report = run(args, body)
    if args.json:
        print(report.text())
        return 0
    tokens = report.usage.input_tokens + report.usage.output_tokens
    print(f"total      ${report.total_usd:.4f}  {report.runs} runs  {tokens} tokens")
    for line in stage_lines(report.by_stage):
        print(line)
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


def stage_lines(stages: Mapping[str, StageTokens | StageTokensJson]) -> list[str]:
    """Tokens per stage beside dollars: requests, input (not from a cache), cached input and
    output, as `t25 task show` and `t25 cost` print them; none before a stage has run."""
    if not stages:
        return []
    head = f"{'tokens by stage':<16} {'requests':>8} {'input':>10} {'cached in':>10} "
    lines = [head + f"{'output':>9} {'cost':>10}"]
    lines += [
        f"  {stage:<14} {s.requests:>8,} {s.input_tokens:>10,} {s.cached_input_tokens:>10,} "
        f"{s.output_tokens:>9,} {'$' + format(s.usd, '.4f'):>10}"
        for stage, s in stages.items()
    ]
    return lines
