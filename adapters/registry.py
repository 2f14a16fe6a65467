"""The adapters T25 ships with, by the name `t25.yaml` profiles use (`adapter: claude`).

The names alone are what a `t25.yaml` is checked against, so a command that only reads
(`t25 task list`) knows them without importing any adapter; the specs and the process
machinery are imported when adapters are made. tests/adapters/test_registry.py keeps the
names and the specs in step.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from adapters.base import CliAdapterSpec
    from core.ports import AgentAdapter

BUILTIN_NAMES = ("claude", "codex", "gemini", "opencode", "aider", "scripted")


def builtin_specs() -> list[CliAdapterSpec]:
    """One spec per name in BUILTIN_NAMES, in that order."""
    from adapters.aider import AiderSpec
    from adapters.claude import ClaudeSpec
    from adapters.codex import CodexSpec
    from adapters.gemini import GeminiSpec
    from adapters.opencode import OpencodeSpec
    from adapters.scripted import ScriptedSpec

    return [ClaudeSpec(), CodexSpec(), GeminiSpec(), OpencodeSpec(), AiderSpec(), ScriptedSpec()]


def builtin_adapters() -> dict[str, AgentAdapter]:
    """A fresh adapter per known CLI (each caches its own version)."""
    from adapters.base import CliAdapter

    return {spec.name: CliAdapter(spec) for spec in builtin_specs()}
