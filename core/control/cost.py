"""What agent runs cost, estimated from the usage each adapter reports.

T25 never sees a provider's bill: each CLI runs on the user's own subscription. The
estimate exists for visibility (which role, agent or model spends the money), from the
rates configured under `cost.rates` in t25.yaml, in USD per million tokens.

The four token counts of a `Usage` are disjoint: adapters report `input_tokens`
without the cached ones, so each count is priced once, at its own rate.

    estimate(usage, rate) -> USD for one run (0.0 when the model has no rate)
    summarize(runs)       -> CostSummary: total, and per role, adapter and model
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Callable, Sequence

from pydantic import BaseModel, ConfigDict

from core.config.schema import Rate
from core.domain.models import Run, Usage

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


class CostSummary(BaseModel):
    """Estimated spend over some runs, grouped the ways an operator asks about it.
    Each grouping sums to `total_usd`; groups are ordered by cost, highest first."""

    model_config = ConfigDict(frozen=True)

    total_usd: float = 0.0
    runs: int = 0
    usage: Usage = Usage()
    by_role: dict[str, float] = {}
    by_adapter: dict[str, float] = {}
    by_model: dict[str, float] = {}


def summarize(runs: Sequence[Run]) -> CostSummary:
    """Add up the cost each run recorded (`cost_usd`) and its tokens."""
    tokens = defaultdict(int)
    for run in runs:
        for field in ("input_tokens", "output_tokens", "cache_read_tokens", "cache_write_tokens"):
            tokens[field] += getattr(run.usage, field)
    return CostSummary(
        total_usd=sum(run.cost_usd for run in runs),
        runs=len(runs),
        usage=Usage(**tokens),
        by_role=_group(runs, lambda run: run.role),
        by_adapter=_group(runs, lambda run: run.adapter or UNKNOWN),
        # The model recorded on the run, else the one its usage report named.
        by_model=_group(runs, lambda run: run.model or run.usage.model or UNKNOWN),
    )


def _group(runs: Sequence[Run], key: Callable[[Run], str]) -> dict[str, float]:
    sums: dict[str, float] = defaultdict(float)
    for run in runs:
        sums[key(run)] += run.cost_usd
    return dict(sorted(sums.items(), key=lambda item: (-item[1], item[0])))
