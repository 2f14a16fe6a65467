"""The short base prompt Codex and Gemini CLI get in place of their own (adapters.base_prompt),
as their argv and environment say it, and what each CLI's request is measured to resend
(adapters.request_size). tests/e2e/real_clis/test_base_prompts.py proves it with the real
CLIs: every request of a whole task carries the role's base prompt, and the task is done."""

from __future__ import annotations

import tomllib
from pathlib import Path

import pytest

from adapters.base import CliAdapter, CliAdapterSpec
from adapters.base_prompt import BASE_PROMPTS, base_prompt_file
from adapters.codex import CodexSpec
from adapters.gemini import GeminiSpec
from adapters.prompt_files import PromptArg
from adapters.registry import builtin_specs
from adapters.request_size import FixedPart, fixed_part
from core.config.config_section import ROLES
from core.domain.agent import AgentRequest
from core.domain.models import TaskState
from core.domain.tools import role_tools


def request(role: str, tools: frozenset[str] | None) -> AgentRequest:
    return AgentRequest(
        task_id="T-1",
        run_id="R-1",
        role=role,
        stage=TaskState.IMPLEMENTING if role == "dev" else TaskState.REVIEW,
        prompt="look",
        cwd=Path("/tmp"),
        model="m",
        tools=tools,
    )


def overrides(spec: CliAdapterSpec, role: str, tools: frozenset[str] | None) -> dict:
    """Codex's `-c` overrides, parsed as Codex parses them (TOML)."""
    args = spec.build_argv(request(role, tools), PromptArg(text="look"))
    found: dict = {}
    for value in (args[i + 1] for i, a in enumerate(args) if a == "-c"):
        if not value.startswith("projects="):
            found.update(tomllib.loads(value))
    return found


def test_each_kind_of_tool_set_has_a_short_base_prompt_of_its_own():
    prompts = {role: base_prompt_file(role_tools(role)) for role in ROLES}
    assert {p.name for p in prompts.values()} == {"read.md", "edit.md", "shell.md"}
    assert prompts["dev"].name == "shell.md" and prompts["docs"].name == "edit.md"
    for path in BASE_PROMPTS.iterdir():
        text = path.read_text(encoding="utf-8")
        assert 200 < len(text.encode()) <= 1000, path  # a few hundred bytes, not 22 KB
        assert "T25" in text and "${" not in text  # Gemini CLI substitutes ${...}
    assert "change nothing" in prompts["reviewer"].read_text()
    assert "run commands" in prompts["dev"].read_text()
    assert "run no commands" in prompts["docs"].read_text()


@pytest.mark.parametrize("role", ROLES)
def test_codex_reads_the_roles_base_prompt_in_place_of_its_instructions(role):
    given = overrides(CodexSpec(), role, role_tools(role))
    assert Path(given["model_instructions_file"]) == base_prompt_file(role_tools(role))
    assert given["include_environment_context"] is False
    assert given["include_permissions_instructions"] is False
    args = CodexSpec().build_argv(request(role, role_tools(role)), PromptArg(text="look"))
    assert args[args.index("multi_agent") - 1] == "--disable"


def test_codex_keeps_its_own_instructions_with_tools_cli():
    given = overrides(CodexSpec(), "dev", None)
    assert not {"model_instructions_file", "include_environment_context"} & set(given)
    assert "multi_agent" not in CodexSpec().build_argv(request("dev", None), PromptArg("look"))


@pytest.mark.parametrize("role", ROLES)
def test_gemini_reads_the_roles_base_prompt_as_its_system_prompt(role):
    env = CliAdapter(GeminiSpec()).environment(request(role, role_tools(role)), None)
    assert Path(env["GEMINI_SYSTEM_MD"]) == base_prompt_file(role_tools(role))
    assert Path(env["GEMINI_SYSTEM_MD"]).is_absolute()  # a file where T25 is installed
    assert "GEMINI_SYSTEM_MD" not in CliAdapter(GeminiSpec()).environment(request(role, None), None)


def test_every_cli_but_t25s_own_says_what_its_requests_resend():
    for spec in builtin_specs():
        if spec.needs_login:
            assert spec.fixed_parts, spec.name
            assert all(f.t25 <= f.defaults for f in spec.fixed_parts.values()), spec.name


def test_a_model_not_measured_takes_the_first_models_figures():
    measured = {"big": FixedPart(t25=12_000, defaults=100_000), "small": FixedPart(3, 6)}
    assert fixed_part(measured, "small") == ("small", FixedPart(3, 6))
    assert fixed_part(measured, "other") == ("big", measured["big"])
    assert fixed_part(measured, None) == ("big", measured["big"])
    assert fixed_part({}, "any") is None
