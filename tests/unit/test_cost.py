"""Cost estimates: per-million rates, cache tokens priced separately, grouping by who spent."""

from __future__ import annotations

from datetime import UTC, datetime

import pytest

from core.config.service_config import CostConfig, Rate
from core.control.cost import CostSummary, estimate, summarize
from core.domain.models import Run, TaskState, Usage

NOW = datetime(2026, 1, 1, tzinfo=UTC)
SONNET = Rate(input=3.0, output=15.0, cache_read=0.3, cache_write=3.75)


def run(
    n: int,
    role: str,
    adapter: str | None,
    model: str | None,
    cost: float,
    usage: Usage | None = None,
) -> Run:
    return Run(
        id=f"R-{n}",
        task_id="T-1",
        stage=TaskState.SPEC,
        role=role,
        adapter=adapter,
        model=model,
        cost_usd=cost,
        usage=usage or Usage(),
        enqueued_at=NOW,
    )


def test_input_and_output_at_per_million_rates():
    usage = Usage(input_tokens=1_000_000, output_tokens=200_000)
    assert estimate(usage, SONNET) == pytest.approx(3.0 + 3.0)


def test_cache_tokens_use_their_own_rates():
    usage = Usage(
        input_tokens=10_000,
        output_tokens=2_000,
        cache_read_tokens=500_000,
        cache_write_tokens=40_000,
    )
    expected = (10_000 * 3.0 + 2_000 * 15.0 + 500_000 * 0.3 + 40_000 * 3.75) / 1_000_000
    assert estimate(usage, SONNET) == pytest.approx(expected)
    assert expected == pytest.approx(0.36)


def test_cache_rates_default_to_free():
    rate = Rate(input=1.0, output=2.0)
    assert estimate(Usage(cache_read_tokens=1_000_000, cache_write_tokens=1_000_000), rate) == 0.0


def test_no_rate_costs_nothing():
    assert estimate(Usage(input_tokens=5_000_000, output_tokens=1_000_000), None) == 0.0


def test_unknown_model_costs_nothing_through_the_config():
    config = CostConfig(rates={"claude-sonnet-4-5": SONNET})
    usage = Usage(input_tokens=1_000_000, model="mystery-model")
    assert estimate(usage, config.rate_for(usage.model)) == 0.0
    dated = Usage(input_tokens=1_000_000, model="claude-sonnet-4-5-20250929")
    assert estimate(dated, config.rate_for(dated.model)) == pytest.approx(3.0)


def test_no_usage_costs_nothing():
    assert estimate(Usage(), SONNET) == 0.0


def test_summary_of_no_runs_is_zero():
    summary = summarize([])
    assert summary == CostSummary()
    assert summary.total_usd == 0.0 and summary.by_role == {}


def test_summary_groups_by_role_adapter_and_model():
    runs = [
        run(1, "spec", "claude", "sonnet", 0.10, Usage(input_tokens=100, output_tokens=10)),
        run(2, "dev", "claude", "opus", 1.50, Usage(input_tokens=1000, cache_read_tokens=50)),
        run(3, "dev", "codex", "gpt-5", 0.40, Usage(output_tokens=5, cache_write_tokens=7)),
        run(4, "reviewer", "codex", "gpt-5", 0.20),
    ]
    summary = summarize(runs)
    assert summary.total_usd == pytest.approx(2.20)
    assert summary.runs == 4
    assert summary.by_role == pytest.approx({"dev": 1.90, "reviewer": 0.20, "spec": 0.10})
    assert summary.by_adapter == pytest.approx({"claude": 1.60, "codex": 0.60})
    assert summary.by_model == pytest.approx({"opus": 1.50, "gpt-5": 0.60, "sonnet": 0.10})
    assert summary.usage == Usage(
        input_tokens=1100, output_tokens=15, cache_read_tokens=50, cache_write_tokens=7
    )


def test_groups_are_ordered_by_cost_highest_first():
    summary = summarize([run(1, "spec", "a", "m", 0.1), run(2, "dev", "b", "n", 0.9)])
    assert list(summary.by_role) == ["dev", "spec"]
    assert list(summary.by_adapter) == ["b", "a"]


def test_runs_without_adapter_or_model_group_as_unknown():
    reported = run(2, "dev", "claude", None, 0.5, Usage(model="sonnet-from-usage"))
    summary = summarize([run(1, "spec", None, None, 0.0), reported])
    assert summary.by_adapter == {"claude": 0.5, "unknown": 0.0}
    assert summary.by_model == {"sonnet-from-usage": 0.5, "unknown": 0.0}
