"""The adapters T25 ships with, by the name `t25.yaml` profiles use (`adapter: scripted`)."""

from __future__ import annotations

from core.agent import AgentAdapter
from adapters.base import CliAdapter
from adapters.scripted import ScriptedSpec


def builtin_adapters() -> dict[str, AgentAdapter]:
    """A fresh adapter per known CLI (each caches its own version)."""
    return {spec.name: CliAdapter(spec) for spec in (ScriptedSpec(),)}
