"""Later stages never load what earlier agents wrote: each CLI's argv and environment for a
QA, review, security or docs run switch its project-level configuration off; a dev run's do
not. (tests/e2e/real_clis/test_planted_config.py proves it with the real CLIs.)"""

from __future__ import annotations

import json
import tomllib
from pathlib import Path

import pytest

from adapters.aider import AiderSpec
from adapters.base import CliAdapter, CliAdapterSpec, project_config_off
from adapters.claude import ClaudeSpec
from adapters.codex import CodexSpec, untrusted_projects
from adapters.gemini import HEADLESS_SETTINGS, GeminiSpec
from adapters.opencode import OpencodeSpec
from adapters.prompt_files import PromptArg
from adapters.registry import builtin_specs
from core.domain.agent import AgentRequest
from core.domain.models import TaskState

LATER = [
    ("qa", TaskState.QA),
    ("reviewer", TaskState.REVIEW),
    ("security", TaskState.REVIEW),
    ("docs", TaskState.DOCS),
]


def request_for(role: str, stage: TaskState, cwd: Path = Path("/tmp")) -> AgentRequest:
    return AgentRequest(
        task_id="T-1",
        run_id="R-1",
        role=role,
        stage=stage,
        prompt="look",
        cwd=cwd,
        model="m",
        args=("--extra",),
    )


def dev() -> AgentRequest:
    return request_for("dev", TaskState.IMPLEMENTING)


def argv(spec: CliAdapterSpec, request: AgentRequest) -> list[str]:
    return spec.build_argv(request, PromptArg(text=request.prompt))


def env(spec: CliAdapterSpec, request: AgentRequest) -> dict[str, str]:
    return CliAdapter(spec).environment(request, None)


def test_the_later_stages_are_qa_review_security_and_docs():
    assert not project_config_off(dev())
    assert not project_config_off(request_for("spec", TaskState.SPEC))
    assert not project_config_off(request_for("planner", TaskState.PLAN))
    assert all(project_config_off(request_for(role, stage)) for role, stage in LATER)


def test_every_shipped_cli_says_what_a_later_stage_switches_off():
    for spec in builtin_specs():
        assert spec.capabilities.project_config_off != "no way" or spec.name == "aider"
    assert AiderSpec().capabilities.project_config_off.startswith("no way")


@pytest.mark.parametrize(("role", "stage"), LATER)
def test_claude_code_reads_only_user_settings_and_no_project_mcp_server(role, stage):
    later = argv(ClaudeSpec(), request_for(role, stage))
    flags = later[: later.index("--")]
    assert flags[flags.index("--setting-sources") + 1] == "user"
    assert "--strict-mcp-config" in flags and "--extra" in flags
    early = argv(ClaudeSpec(), dev())
    assert "--setting-sources" not in early and "--strict-mcp-config" not in early


@pytest.mark.parametrize(("role", "stage"), LATER)
def test_gemini_is_not_told_to_trust_a_later_stages_tree(role, stage):
    later = request_for(role, stage)
    assert "--skip-trust" in argv(GeminiSpec(), later)
    assert "GEMINI_CLI_TRUST_WORKSPACE" not in env(GeminiSpec(), later)
    assert env(GeminiSpec(), dev())["GEMINI_CLI_TRUST_WORKSPACE"] == "true"
    assert "--skip-trust" not in argv(GeminiSpec(), dev())


def test_gemini_user_settings_keep_project_agents_skills_hooks_and_env_off():
    settings = json.loads(HEADLESS_SETTINGS)
    assert settings["advanced"]["ignoreLocalEnv"] is True
    assert settings["experimental"]["enableAgents"] is False
    assert settings["skills"]["enabled"] is False
    assert settings["hooksConfig"]["enabled"] is False


@pytest.mark.parametrize(("role", "stage"), LATER)
def test_opencode_skips_project_config_in_a_later_stage(role, stage):
    later = env(OpencodeSpec(), request_for(role, stage))
    assert later["OPENCODE_DISABLE_PROJECT_CONFIG"] == "1"
    assert later["OPENCODE_DISABLE_CLAUDE_CODE"] == "1"
    assert "OPENCODE_DISABLE_PROJECT_CONFIG" not in env(OpencodeSpec(), dev())


@pytest.mark.parametrize(("role", "stage"), LATER)
def test_aider_pins_what_would_run_a_program_and_the_endpoint(role, stage, monkeypatch):
    monkeypatch.setenv("OPENAI_API_BASE", "http://127.0.0.1:4000/v1")
    later = argv(AiderSpec(), request_for(role, stage))
    pinned = ["--no-auto-lint", "--no-auto-test", "--no-suggest-shell-commands"]
    assert all(flag in later for flag in pinned)
    assert "--openai-api-base=http://127.0.0.1:4000/v1" in later
    assert later[-1].startswith("--message=")  # the prompt stays last
    assert not set(pinned) & set(argv(AiderSpec(), dev()))


def test_aider_pins_no_endpoint_the_operator_did_not_set(monkeypatch):
    monkeypatch.delenv("OPENAI_API_BASE", raising=False)
    later = argv(AiderSpec(), request_for("reviewer", TaskState.REVIEW))
    assert not [a for a in later if a.startswith("--openai-api-base")]


def _projects(argv: list[str]) -> dict[str, dict[str, str]]:
    values = [argv[i + 1] for i, a in enumerate(argv) if a == "-c"]
    tables = [v for v in values if v.startswith("projects=")]
    assert len(tables) == 1
    return tomllib.loads(tables[0])["projects"]


@pytest.mark.parametrize(("role", "stage"), LATER)
def test_codex_marks_the_tree_and_every_folder_above_untrusted(role, stage, tmp_path):
    tree = tmp_path / "shop" / "src"
    tree.mkdir(parents=True)
    projects = _projects(argv(CodexSpec(), request_for(role, stage, tree)))
    assert {str(tree), str(tmp_path / "shop"), str(tmp_path), "/"} <= set(projects)
    assert {p["trust_level"] for p in projects.values()} == {"untrusted"}
    assert not [a for a in argv(CodexSpec(), dev()) if a.startswith("projects=")]


def test_codex_marks_a_linked_worktrees_main_checkout_untrusted_too(tmp_path):
    """A linked worktree's trust is its repository's: the main checkout is marked as well,
    wherever the worktrees live."""
    main = tmp_path / "shop"
    gitdir = main / ".git" / "worktrees" / "T-1"
    gitdir.mkdir(parents=True)
    (gitdir / "commondir").write_text("../..\n")
    tree = tmp_path / "elsewhere" / "T-1"
    tree.mkdir(parents=True)
    (tree / ".git").write_text(f"gitdir: {gitdir}\n")
    projects = tomllib.loads(f"projects={untrusted_projects(tree)}")["projects"]
    assert str(main) in projects and str(tree) in projects


def test_codex_reads_a_path_with_quotes_and_backslashes_as_one_key(tmp_path):
    tree = tmp_path / 'we"ird\\name'
    tree.mkdir()
    projects = tomllib.loads(f"projects={untrusted_projects(tree)}")["projects"]
    assert projects[str(tree)] == {"trust_level": "untrusted"}
