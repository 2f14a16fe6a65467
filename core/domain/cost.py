"""What runs cost, as a face shows it: a total, and the same money by role, adapter and model.

The value only; `core.control.cost` estimates a run's cost and sums runs into it.
"""

from __future__ import annotations

from pydantic import BaseModel, ConfigDict, Field

from core.domain.models import Usage


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
