"""The adapters T25 ships with, by the name `t25.yaml` profiles use (`adapter: claude`)."""

from __future__ import annotations

from adapters.aider import AiderSpec
from adapters.base import CliAdapter, CliAdapterSpec
from adapters.claude import ClaudeSpec
from adapters.codex import CodexSpec
from adapters.gemini import GeminiSpec
from adapters.opencode import OpencodeSpec
from adapters.scripted import ScriptedSpec
from core.ports import AgentAdapter


def builtin_specs() -> list[CliAdapterSpec]:
    return [ClaudeSpec(), CodexSpec(), GeminiSpec(), OpencodeSpec(), AiderSpec(), ScriptedSpec()]


def builtin_adapters() -> dict[str, AgentAdapter]:
    """A fresh adapter per known CLI (each caches its own version)."""
    return {spec.name: CliAdapter(spec) for spec in builtin_specs()}
