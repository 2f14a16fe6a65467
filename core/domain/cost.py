"""What runs cost, as a face shows it: a total, and the same money by role, adapter and model.

The value only; `core.control.cost` estimates a run's cost and sums runs into it.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from pydantic import BaseModel, ConfigDict, Field

from core.domain.models import Usage


class StageTokens(BaseModel):
    """What the runs of one stage sent and received, beside what they cost.

    `input_tokens` is the input not read from a cache (cache writes included),
    `cached_input_tokens` the input read from one: together, all a stage's requests sent.
    `requests` counts the model requests the CLIs reported (`Run.requests`); a CLI that
    reports coarser than per request (Codex per turn, Gemini CLI per model) counts less.
    """

    model_config = ConfigDict(frozen=True, defer_build=True)

    runs: int = 0
    requests: int = 0
    input_tokens: int = 0
    cached_input_tokens: int = 0
    output_tokens: int = 0
    usd: float = 0.0


class CostSummary(BaseModel):
    """Estimated spend over some runs, grouped the ways an operator asks about it.
    Each grouping sums to `total_usd`; groups are ordered by cost, highest first."""

    model_config = ConfigDict(frozen=True, defer_build=True)

    total_usd: float = 0.0
    runs: int = 0
    usage: Usage = Field(default_factory=Usage)  # a factory: importing builds no model
    by_role: dict[str, float] = {}
    by_adapter: dict[str, float] = {}
    by_model: dict[str, float] = {}
    # The same runs by stage (SPEC, PLAN, IMPLEMENTING, …), in the order they first ran.
    by_stage: dict[str, StageTokens] = {}


@dataclass(frozen=True, slots=True)
class CostGroup:
    """Runs alike in role, adapter, model and stage, summed: what a store adds up in one read,
    so that a CostSummary is made without reading each run. `adapter` and `model` (the model
    a run recorded, else the one its usage named) are None where none was recorded;
    `first_run` is the group's lowest run number, for the order stages first ran in."""

    role: str
    adapter: str | None
    model: str | None
    stage: str
    runs: int
    requests: int
    input_tokens: int
    output_tokens: int
    cache_read_tokens: int
    cache_write_tokens: int
    usd: float
    first_run: int


COSTLIEST = 50  # the costliest tasks the cost pane lists


class TaskCost(BaseModel):
    """One task's runs, their input and output tokens, and what they cost: a row of the
    costliest tasks."""

    model_config = ConfigDict(frozen=True, defer_build=True)

    task_id: str
    runs: int
    tokens: int
    usd: float


class Spend(BaseModel):
    """What a task has spent against its budget (limits.max_cost_usd and max_tokens, or the
    task's own, raised by an operator's answer); with `role`, what that role's runs of the
    task have spent against the role's (limits.by_role). Tokens count every kind a CLI
    reports."""

    model_config = ConfigDict(frozen=True, defer_build=True)

    role: str | None = None
    usd: float = 0.0
    tokens: int = 0
    budget_usd: float | None = None
    budget_tokens: int | None = None
    unpriced: tuple[str, ...] = ()  # models that ran with tokens and no rate: $0 is no figure

    @property
    def reached(self) -> bool:
        """Whether the next run would go past a budget: the spend is at or over it."""
        return (self.budget_usd is not None and self.usd >= self.budget_usd) or (
            self.budget_tokens is not None and self.tokens >= self.budget_tokens
        )

    def line(self) -> str:
        """`$0.42 of $5.00 · 12,345 of 1,000,000 tokens`: the spend, against its budget
        (`reviewer: …` for a role's)."""
        usd = f"${self.usd:.4f}" + (f" of ${self.budget_usd:.2f}" if self.budget_usd else "")
        if self.unpriced:
            usd += f" (not priced: {', '.join(self.unpriced)})"
        tokens = f"{self.tokens:,}" + (f" of {self.budget_tokens:,}" if self.budget_tokens else "")
        return f"{self.role + ': ' if self.role else ''}{usd} · {tokens} tokens"


def tokens_of(usage: Usage) -> int:
    """Every token a run reported: input, output, cache read and cache write."""
    return (
        usage.input_tokens
        + usage.output_tokens
        + usage.cache_read_tokens
        + usage.cache_write_tokens
    )


_USD = re.compile(r"\$\s*([0-9][0-9_,]*(?:\.[0-9]+)?)")
_TOKENS = re.compile(r"([0-9][0-9_,]*(?:\.[0-9]+)?)\s*([kKmM]?)\s*tokens?\b")


def raised_budget(text: str) -> tuple[float | None, int | None]:
    """The budget an operator's answer names: `$12` (USD), `3M tokens`, `250k tokens`,
    `2,000,000 tokens`; (None, None) when it names none."""
    usd = _USD.search(text)
    tokens = _TOKENS.search(text)
    new_usd = float(usd[1].replace(",", "").replace("_", "")) if usd else None
    new_tokens = None
    if tokens:
        scale = {"": 1, "k": 1_000, "m": 1_000_000}[tokens[2].lower()]
        new_tokens = int(float(tokens[1].replace(",", "").replace("_", "")) * scale)
    return new_usd, new_tokens
