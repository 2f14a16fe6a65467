"""What every request of a run resends whatever the conversation: the CLI's system prompt and
its tools' schemas, the fixed part of a request. A stage's run sends it once per model turn,
so it is most of what a task costs, and it depends on the CLI, on T25's tool sets and, for
some CLIs, on the model.

Each adapter spec keeps the figures `bench/tokens.py` measured against T25's fake model
(`CliAdapterSpec.fixed_parts`, per model); `t25 doctor` shows them for each configured CLI
and model.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass


@dataclass(frozen=True)
class FixedPart:
    """One request's system prompt and tool schemas, in bytes of JSON: the largest of a
    task's runs with T25's tool sets (the dev run's), and with the CLI's own defaults
    (`tools: cli`)."""

    t25: int
    defaults: int


def fixed_part(
    measured: Mapping[str, FixedPart], model: str | None
) -> tuple[str, FixedPart] | None:
    """The figures of `model`, else of the first model measured (they hold for any model
    when the CLI's prompt does not depend on it); with the model they were measured on."""
    if model is not None and model in measured:
        return model, measured[model]
    return next(iter(measured.items()), None)
