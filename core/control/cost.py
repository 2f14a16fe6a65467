"""What agent runs cost, estimated from the usage each adapter reports.

T25 never sees a provider's bill: each CLI runs on the user's own subscription. The
estimate exists for visibility (which role, agent or model spends the money), from the
rates configured under `cost.rates` in t25.yaml, in USD per million tokens.

The four token counts of a `Usage` are disjoint: adapters report `input_tokens`
without the cached ones, so each count is priced once, at its own rate.

    estimate(usage, rate) -> USD for one run (0.0 when the model has no rate)
    summarize(runs)       -> CostSummary: total, and per role, adapter, model and stage
    summarize_groups(gs)  -> the same, from runs a store summed (`Store.cost_groups`)
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Callable, Sequence

from core.config.service_config import Rate
from core.domain.cost import CostGroup, CostSummary, StageTokens
from core.domain.models import Run, Usage, parse_id

__all__ = ["CostSummary", "estimate", "summarize", "summarize_groups"]

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
    return summarize_groups(groups_of(runs))


def groups_of(runs: Sequence[Run]) -> list[CostGroup]:
    """`runs` summed by role, adapter, model and stage, as a store sums them
    (`Store.cost_groups`): the one shape both are summarized from."""
    sums: dict[tuple[str, str | None, str | None, str], list[Run]] = defaultdict(list)
    for run in runs:
        model = run.model or run.usage.model or None
        sums[(run.role, run.adapter or None, model, run.stage.value)].append(run)
    return [
        CostGroup(
            role=role,
            adapter=adapter,
            model=model,
            stage=stage,
            runs=len(alike),
            requests=sum(len(run.requests) for run in alike),
            input_tokens=sum(run.usage.input_tokens for run in alike),
            output_tokens=sum(run.usage.output_tokens for run in alike),
            cache_read_tokens=sum(run.usage.cache_read_tokens for run in alike),
            cache_write_tokens=sum(run.usage.cache_write_tokens for run in alike),
            usd=sum(run.cost_usd for run in alike),
            first_run=min(parse_id("R", run.id) for run in alike),
        )
        for (role, adapter, model, stage), alike in sums.items()
    ]


def summarize_groups(groups: Sequence[CostGroup]) -> CostSummary:
    """The total, and the money by role, adapter, model and stage, of runs summed in groups."""
    return CostSummary(
        total_usd=sum(g.usd for g in groups),
        runs=sum(g.runs for g in groups),
        usage=Usage(
            input_tokens=sum(g.input_tokens for g in groups),
            output_tokens=sum(g.output_tokens for g in groups),
            cache_read_tokens=sum(g.cache_read_tokens for g in groups),
            cache_write_tokens=sum(g.cache_write_tokens for g in groups),
        ),
        by_role=_group(groups, lambda g: g.role),
        by_adapter=_group(groups, lambda g: g.adapter or UNKNOWN),
        by_model=_group(groups, lambda g: g.model or UNKNOWN),
        by_stage=by_stage(groups),
    )


def by_stage(groups: Sequence[CostGroup]) -> dict[str, StageTokens]:
    """Each stage's runs, requests, tokens and cost, stages in the order they first ran."""
    stages: dict[str, list[CostGroup]] = defaultdict(list)
    for group in sorted(groups, key=lambda g: g.first_run):
        stages[group.stage].append(group)
    return {
        stage: StageTokens(
            runs=sum(g.runs for g in of_stage),
            requests=sum(g.requests for g in of_stage),
            input_tokens=sum(g.input_tokens + g.cache_write_tokens for g in of_stage),
            cached_input_tokens=sum(g.cache_read_tokens for g in of_stage),
            output_tokens=sum(g.output_tokens for g in of_stage),
            usd=sum(g.usd for g in of_stage),
        )
        for stage, of_stage in stages.items()
    }


def _group(groups: Sequence[CostGroup], key: Callable[[CostGroup], str]) -> dict[str, float]:
    sums: dict[str, float] = defaultdict(float)
    for group in groups:
        sums[key(group)] += group.usd
    return dict(sorted(sums.items(), key=lambda item: (-item[1], item[0])))
