"""The adapters T25 ships with, by the name `t25.yaml` profiles use (`adapter: claude`): the
only list of the agent CLIs. Everything else reaches a CLI through it - the worker its
adapter, the transcript its renderer, `t25 doctor` its login probe, `t25 init` its models -
and each CLI's module (adapters/<cli>.py) holds all T25 knows of it;
tests/unit/adapters/test_registry.py checks that nothing else lists or imports them.

The names alone are what a `t25.yaml` is checked against, so a command that only reads
(`t25 task list`) knows them without importing any adapter; the specs and the process
machinery are imported when adapters are made. tests/e2e/cli/test_startup.py keeps the names
and the specs in step, and tests/unit/adapters/test_registry.py the files the CLIs read with
the default protected paths (core.config.agent_files), which the core holds as data.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from adapters.base import CliAdapterSpec
    from core.ports import AgentAdapter

BUILTIN_NAMES = ("claude", "codex", "gemini", "opencode", "aider", "scripted")
OWN_AGENT = "scripted"  # T25's own model-free agent; every other name is an outside CLI


def builtin_specs() -> list[CliAdapterSpec]:
    """One spec per name in BUILTIN_NAMES, in that order."""
    from adapters.aider import AiderSpec
    from adapters.claude import ClaudeSpec
    from adapters.codex import CodexSpec
    from adapters.gemini import GeminiSpec
    from adapters.opencode import OpencodeSpec
    from adapters.scripted import ScriptedSpec

    return [ClaudeSpec(), CodexSpec(), GeminiSpec(), OpencodeSpec(), AiderSpec(), ScriptedSpec()]


def agent_clis() -> list[CliAdapterSpec]:
    """The outside agent CLIs, in T25's order of preference (`t25 init` tries them so)."""
    return [spec for spec in builtin_specs() if spec.name != OWN_AGENT]


def builtin_adapters() -> dict[str, AgentAdapter]:
    """A fresh adapter per known CLI (each caches its own version)."""
    from adapters.base import CliAdapter

    return {spec.name: CliAdapter(spec) for spec in builtin_specs()}
