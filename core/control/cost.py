"""What agent runs cost, estimated from the usage each adapter reports.

T25 never sees a provider's bill: each CLI runs on the user's own subscription. The
estimate exists for visibility (which role, agent or model spends the money), from the
rates configured under `cost.rates` in t25.yaml, in USD per million tokens.

The four token counts of a `Usage` are disjoint: adapters report `input_tokens`
without the cached ones, so each count is priced once, at its own rate.

    estimate(usage, rate) -> USD for one run (0.0 when the model has no rate)
    summarize(runs)       -> CostSummary: total, and per role, adapter, model and stage
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Callable, Sequence

from core.config.service_config import Rate
from core.domain.cost import CostSummary, StageTokens
from core.domain.models import Run, Usage

__all__ = ["CostSummary", "estimate", "summarize"]

PER = 1_000_000  # rates are per million tokens
UNKNOWN = "unknown"  # the group of runs with no adapter or model recorded


def estimate(usage: Usage, rate: Rate | None) -> float:
    """USD for `usage` at `rate`; an unpriced model (None) costs 0.0, not an error,
    because a missing rate must never stop a task."""
    if rate is None:
        return 0.0
    return (
        usage.input_tokens * rate.input
        + usage.output_tokens * rate.output
        + usage.cache_read_tokens * rate.cache_read
        + usage.cache_write_tokens * rate.cache_write
    ) / PER


def summarize(runs: Sequence[Run]) -> CostSummary:
    """Add up the cost each run recorded (`cost_usd`) and its tokens."""
    return CostSummary(
        total_usd=sum(run.cost_usd for run in runs),
        runs=len(runs),
        usage=Usage(
            input_tokens=sum(run.usage.input_tokens for run in runs),
            output_tokens=sum(run.usage.output_tokens for run in runs),
            cache_read_tokens=sum(run.usage.cache_read_tokens for run in runs),
            cache_write_tokens=sum(run.usage.cache_write_tokens for run in runs),
        ),
        by_role=_group(runs, lambda run: run.role),
        by_adapter=_group(runs, lambda run: run.adapter or UNKNOWN),
        # The model recorded on the run, else the one its usage report named.
        by_model=_group(runs, lambda run: run.model or run.usage.model or UNKNOWN),
        by_stage=by_stage(runs),
    )


def by_stage(runs: Sequence[Run]) -> dict[str, StageTokens]:
    """Each stage's runs, requests, tokens and cost, stages in the order they first ran."""
    stages: dict[str, list[Run]] = defaultdict(list)
    for run in runs:
        stages[run.stage.value].append(run)
    return {
        stage: StageTokens(
            runs=len(of_stage),
            requests=sum(len(run.requests) for run in of_stage),
            input_tokens=sum(r.usage.input_tokens + r.usage.cache_write_tokens for r in of_stage),
            cached_input_tokens=sum(run.usage.cache_read_tokens for run in of_stage),
            output_tokens=sum(run.usage.output_tokens for run in of_stage),
            usd=sum(run.cost_usd for run in of_stage),
        )
        for stage, of_stage in stages.items()
    }


def _group(runs: Sequence[Run], key: Callable[[Run], str]) -> dict[str, float]:
    sums: dict[str, float] = defaultdict(float)
    for run in runs:
        sums[key(run)] += run.cost_usd
    return dict(sorted(sums.items(), key=lambda item: (-item[1], item[0])))
