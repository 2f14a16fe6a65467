"""`t25 doctor` on what each configured CLI and model resends with every model request: its
system prompt and tool schemas, under T25's tool sets and with the CLI's own defaults, as
`bench/tokens.py` measured them (adapters.request_size)."""

from __future__ import annotations

from core.config.schema import Config
from t25_tui.cli.shapes import RequestCost


def request_costs(config: Config) -> list[RequestCost]:
    """One entry per CLI and model the roles name (a project's own chains too), for the CLIs
    whose figures T25 ships."""
    from adapters.registry import builtin_specs
    from adapters.request_size import fixed_part

    specs = {spec.name: spec for spec in builtin_specs()}
    out = []
    for adapter, model in dict.fromkeys((p.adapter, p.model) for p in config.profiles()):
        spec = specs.get(adapter)
        found = fixed_part(spec.fixed_parts, model) if spec else None
        if spec is None or found is None:
            continue
        measured_on, figures = found
        out.append(
            RequestCost(
                adapter=adapter,
                model=model,
                measured_on=measured_on,
                t25_bytes=figures.t25,
                defaults_bytes=figures.defaults,
                note=spec.fixed_part_note,
            )
        )
    return out


REQUESTS_HEADING = "each request resends (its system prompt and tool schemas):"


def request_line(cost: RequestCost) -> str:
    """One entry as a person reads it; what changes with the model is said for a model whose
    own figures T25 does not have."""
    model = cost.model or "its default model"
    line = (
        f"{cost.adapter} ({model}): {_kb(cost.t25_bytes)} under T25, "
        f"{_kb(cost.defaults_bytes)} with its own defaults"
    )
    if cost.measured_on == cost.model:
        return line
    return line + f", as measured on {cost.measured_on}" + (f"; {cost.note}" if cost.note else "")


def _kb(size: int) -> str:
    return f"{size / 1000:.1f} KB"
