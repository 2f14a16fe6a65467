"""Each role's tool set, as each CLI's argv and environment say it: every flag T25 passes is
one the pinned CLI's own `--help` lists, a read-only role gets the CLI's narrowest set, and a
profile's `tools: cli` leaves the CLI as it was. (tests/e2e/real_clis/test_tool_sets.py proves it
with the real CLIs: a read-only role's write is refused, and the bytes each request saves.)"""

from __future__ import annotations

import json
import re
import tomllib
from pathlib import Path

import pytest

from adapters.aider import AiderSpec
from adapters.base import CliAdapter, CliAdapterSpec
from adapters.claude import OVERHEAD_ENV, ClaudeSpec
from adapters.codex import CodexSpec
from adapters.gemini import POLICIES, GeminiSpec
from adapters.opencode import OpencodeSpec
from adapters.prompt_files import PromptArg
from core.config.config_section import ROLES
from core.config.schema import AgentProfile
from core.domain.agent import AgentRequest
from core.domain.models import TaskState
from core.domain.tools import ROLE_TOOLS, TOOL_CLASSES, read_only, tools_for

HELP = Path(__file__).parent / "captures" / "help"
# The help text that lists the flags of the command T25 runs.
HELP_OF = {
    "claude": "claude--help.txt",
    "codex": "codex-exec--help.txt",
    "gemini": "gemini--help.txt",
    "opencode": "opencode-run--help.txt",
    "aider": "aider--help.txt",
}
SPECS: list[CliAdapterSpec] = [ClaudeSpec(), CodexSpec(), GeminiSpec(), OpencodeSpec(), AiderSpec()]
STAGES = {
    "spec": TaskState.SPEC,
    "planner": TaskState.PLAN,
    "dev": TaskState.IMPLEMENTING,
    "qa": TaskState.QA,
    "reviewer": TaskState.REVIEW,
    "security": TaskState.REVIEW,
    "docs": TaskState.DOCS,
}
READING = ("spec", "planner", "qa", "reviewer", "security")


def request(role: str, tools: frozenset[str] | None) -> AgentRequest:
    return AgentRequest(
        task_id="T-1",
        run_id="R-1",
        role=role,
        stage=STAGES[role],
        prompt="look",
        cwd=Path("/tmp"),
        model="m",
        tools=tools,
    )


def argv(spec: CliAdapterSpec, role: str, tools: frozenset[str] | None = None) -> list[str]:
    return spec.build_argv(request(role, tools), PromptArg(text="look"))


def env(spec: CliAdapterSpec, role: str, tools: frozenset[str] | None) -> dict[str, str]:
    return CliAdapter(spec).environment(request(role, tools), None)


def default(role: str) -> frozenset[str] | None:
    return tools_for(role, None)


def flags(args: list[str]) -> list[str]:
    """The options of an argv, up to its prompt: `--name` of `--name=value` included."""
    out = []
    for arg in args:
        if arg == "--" or arg.startswith(("--prompt=", "--message=")):
            break
        if arg.startswith("-"):
            out.append(arg.split("=")[0])
    return out


# -- the tool sets -------------------------------------------------------------------------


def test_each_role_has_a_default_set_and_the_reading_roles_only_read_and_search():
    assert set(ROLE_TOOLS) == set(ROLES)
    assert all(ROLE_TOOLS[role] == {"read", "search"} for role in READING)
    assert ROLE_TOOLS["dev"] == {"read", "search", "edit", "shell"}
    assert ROLE_TOOLS["docs"] == {"read", "search", "edit"}
    assert all(read_only(ROLE_TOOLS[role]) for role in READING)
    assert not read_only(ROLE_TOOLS["docs"]) and not read_only(None)


def test_a_profile_names_its_own_set_or_the_clis_defaults():
    assert AgentProfile(adapter="claude").tools is None
    assert tools_for("reviewer", AgentProfile(adapter="claude").tools) == {"read", "search"}
    assert tools_for("dev", ["read", "edit"]) == {"read", "edit"}
    assert tools_for("dev", []) == frozenset()
    assert tools_for("dev", "cli") is None


def test_a_profile_naming_an_unknown_tool_class_is_refused(tmp_path):
    from core.config.schema import load_config
    from core.errors import ConfigError

    (tmp_path / "t25.yaml").write_text(
        "projects: [{name: app}]\nroles:\n  dev:\n    - adapter: claude\n      tools: [write]\n"
    )
    with pytest.raises(ConfigError) as caught:
        load_config(tmp_path / "t25.yaml")
    assert str(caught.value).endswith(
        "t25.yaml:5: roles.dev[0].tools: unknown tool class 'write' (known: read, search, edit, "
        "shell); `tools: cli` keeps the CLI's own tools"
    )


# -- every flag is the pinned CLI's own ------------------------------------------------------


@pytest.mark.parametrize("role", ROLES)
@pytest.mark.parametrize("spec", SPECS, ids=lambda s: s.name)
def test_every_flag_t25_passes_for_a_role_is_in_the_clis_help(spec, role):
    help_text = (HELP / HELP_OF[spec.name]).read_text(encoding="utf-8")
    for tools in (default(role), None):
        for flag in flags(argv(spec, role, tools)):
            assert re.search(rf"(?<![\w-]){re.escape(flag)}(?![\w-])", help_text), (
                f"{spec.name} {role}: {flag} is not in {HELP_OF[spec.name]}"
            )


@pytest.mark.parametrize("spec", SPECS, ids=lambda s: s.name)
def test_tools_cli_adds_no_flag_and_no_variable_of_t25s(spec):
    assert spec.tool_args(None) == (
        ["--sandbox", "workspace-write"] if spec.name == "codex" else []
    )
    assert spec.tool_env(None) == {}


@pytest.mark.parametrize("spec", SPECS, ids=lambda s: s.name)
def test_each_cli_says_how_it_narrows_a_tool_set_or_what_it_cannot(spec):
    assert spec.capabilities.tools != "no way"


# -- Claude Code -----------------------------------------------------------------------------


def tools_flag(args: list[str]) -> set[str] | None:
    if "--tools" not in args:
        return None
    value = args[args.index("--tools") + 1]
    return set(value.split(",")) if value else set()


@pytest.mark.parametrize("role", READING)
def test_claude_offers_a_reading_role_read_grep_and_glob_only(role):
    args = argv(ClaudeSpec(), role, default(role))
    assert tools_flag(args) == {"Read", "Grep", "Glob"}
    assert "--strict-mcp-config" in args  # and no MCP server's tools either
    assert "--exclude-dynamic-system-prompt-sections" in args


def test_claude_offers_dev_its_editors_and_bash_and_docs_no_bash():
    assert tools_flag(argv(ClaudeSpec(), "dev", default("dev"))) == {
        "Read", "Grep", "Glob", "Write", "Edit", "Bash",
    }  # fmt: skip
    assert tools_flag(argv(ClaudeSpec(), "docs", default("docs"))) == {
        "Read", "Grep", "Glob", "Write", "Edit",
    }  # fmt: skip
    assert tools_flag(argv(ClaudeSpec(), "dev", frozenset())) == set()


def test_claudes_overhead_is_switched_off_only_when_t25_sets_the_tools():
    narrowed = env(ClaudeSpec(), "dev", default("dev"))
    assert all(narrowed[k] == "1" for k in OVERHEAD_ENV)
    assert set(OVERHEAD_ENV) == {
        "CLAUDE_CODE_DISABLE_AUTO_MEMORY",
        "CLAUDE_CODE_DISABLE_GIT_INSTRUCTIONS",
        "CLAUDE_CODE_DISABLE_BACKGROUND_TASKS",
    }
    defaults = env(ClaudeSpec(), "dev", None)
    assert not set(OVERHEAD_ENV) & set(defaults)
    args = argv(ClaudeSpec(), "dev", None)
    assert tools_flag(args) is None and "--exclude-dynamic-system-prompt-sections" not in args


# -- Codex -----------------------------------------------------------------------------------


def sandbox(args: list[str]) -> str:
    assert args.count("--sandbox") == 1, args
    return args[args.index("--sandbox") + 1]


@pytest.mark.parametrize("role", ROLES)
def test_codex_runs_a_reading_role_in_its_read_only_sandbox(role):
    expected = "read-only" if role in READING else "workspace-write"
    assert sandbox(argv(CodexSpec(), role, default(role))) == expected
    assert sandbox(argv(CodexSpec(), role, None)) == "workspace-write"


def test_codex_drops_goals_skills_user_questions_and_web_search_when_t25_sets_the_tools():
    args = argv(CodexSpec(), "dev", default("dev"))
    overrides = [args[i + 1] for i, a in enumerate(args) if a == "-c"]
    assert args[args.index("--disable") : args.index("--disable") + 2] == ["--disable", "goals"]
    assert "skills.include_instructions=false" in overrides
    assert "tools.experimental_request_user_input.enabled=false" in overrides
    assert 'web_search="disabled"' in overrides
    for override in overrides:  # each is valid TOML, as Codex parses it
        tomllib.loads(override.replace("projects=", "p=", 1))
    assert "--disable" not in argv(CodexSpec(), "dev", None)


# -- Gemini CLI ------------------------------------------------------------------------------


def policies(args: list[str]) -> list[str]:
    return [Path(args[i + 1]).name for i, a in enumerate(args) if a == "--policy"]


def test_gemini_denies_every_tool_and_allows_the_roles_classes_back():
    assert policies(argv(GeminiSpec(), "reviewer", default("reviewer"))) == [
        "deny-all.toml",
        "read.toml",
        "search.toml",
    ]
    assert policies(argv(GeminiSpec(), "dev", default("dev")))[1:] == [
        "read.toml", "search.toml", "edit.toml", "shell.toml",
    ]  # fmt: skip
    assert policies(argv(GeminiSpec(), "dev", None)) == []
    assert "--yolo" in argv(GeminiSpec(), "dev", default("dev"))


def test_geminis_policy_files_ship_with_t25_and_parse():
    deny = tomllib.loads((POLICIES / "deny-all.toml").read_text())["rule"]
    assert deny == [{"toolName": "*", "decision": "deny", "priority": 100}]
    for kind in TOOL_CLASSES:
        rules = tomllib.loads((POLICIES / f"{kind}.toml").read_text())["rule"]
        assert [r["decision"] for r in rules] == ["allow"]
        assert rules[0]["priority"] > deny[0]["priority"] and rules[0]["toolName"]
    shell = tomllib.loads((POLICIES / "shell.toml").read_text())["rule"][0]["toolName"]
    edit = tomllib.loads((POLICIES / "edit.toml").read_text())["rule"][0]["toolName"]
    assert shell == ["run_shell_command"] and set(edit) == {"write_file", "replace"}


# -- opencode --------------------------------------------------------------------------------


def permission(role: str, tools: frozenset[str] | None) -> dict[str, str] | None:
    value = env(OpencodeSpec(), role, tools).get("OPENCODE_PERMISSION")
    return None if value is None else json.loads(value)


def test_opencode_denies_every_tool_but_the_roles():
    assert permission("reviewer", default("reviewer")) == {
        "*": "deny", "read": "allow", "list": "allow", "grep": "allow", "glob": "allow",
    }  # fmt: skip
    dev = permission("dev", default("dev"))
    assert dev is not None and dev["edit"] == dev["bash"] == "allow"
    assert next(iter(dev)) == "*"  # first, so that every allow after it wins
    assert permission("dev", None) is None


# -- aider -----------------------------------------------------------------------------------


@pytest.mark.parametrize("role", ROLES)
def test_aider_has_no_tools_and_a_reading_role_asks_in_a_dry_run(role):
    args = argv(AiderSpec(), role, default(role))
    reading = role in READING
    assert ("--dry-run" in args) is reading
    assert (args[args.index("--chat-mode") + 1] == "ask") if reading else "--chat-mode" not in args
    assert "--no-suggest-shell-commands" in args
    assert "--dry-run" not in argv(AiderSpec(), role, None)
