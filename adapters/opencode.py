"""opencode (`opencode run --format json`): one JSON event a line, tokens and cost per step."""

from __future__ import annotations

import json
import re
from collections.abc import Iterator, Mapping, Sequence
from pathlib import Path

from adapters.base import Capabilities, CliAdapterSpec, CliOutput
from adapters.entries import Entry, EventShapes, Kind, call, error_entry, message_entry, output
from adapters.login import LoginProbe
from adapters.parsing import (
    JsonObject,
    count_at,
    json_lines,
    number,
    object_at,
    summed,
    text_of,
)
from adapters.process import NETWORK_ENV
from adapters.prompt_files import PromptArg, inline_prompt
from adapters.request_size import FixedPart
from core.domain.agent import AgentRequest
from core.domain.models import Usage

# A provider's endpoint in opencode's JSON configuration.
_BASE_URL = re.compile(r'"baseURL"\s*:\s*"([^"]+)"')

EDIT_TOOLS = {"write", "edit", "patch"}
# Each tool class (core.domain.tools) as opencode's permission keys. OPENCODE_PERMISSION is
# merged into its config's `permission`: "*" denies every tool (built-in and MCP; a denied
# tool is not offered to the model at all), the run's classes are allowed back. 1.18.33
# offers 10 tools by default: skill, task, todowrite and webfetch among them.
PERMISSIONS = {
    "read": ("read", "list"),
    "search": ("grep", "glob"),
    "edit": ("edit",),  # write, edit and patch
    "shell": ("bash",),
}


def auth_list(code: int, out: str, err: str) -> bool | None:
    """`opencode auth list`: "N credentials" stored, and "N environment variable(s)" set."""
    counts = re.findall(r"(\d+)\s+(?:credentials?|environment variables?)\b", out)
    if code != 0 or not counts:
        return None
    return sum(int(n) for n in counts) > 0


# -- its `run --format json` events as a transcript (adapters.transcript) --------------------


def _render(e: JsonObject) -> Iterator[Entry]:
    """Its text parts, tool calls with their results, and its session's errors."""
    kind = e.get("type")
    part = object_at(e, "part")
    if kind == "text" and part:
        yield message_entry(text_of(part.get("text")))
    elif kind == "tool_use" and part:
        state = object_at(part, "state")
        yield Entry(Kind.CALL, call(text_of(part.get("tool")), state.get("input")))
        if state.get("status") == "error":
            yield error_entry(text_of(state.get("error")) or "the tool failed")
        elif "output" in state:
            yield Entry(Kind.RESULT, output(text_of(state.get("output"))))
    elif kind == "error" and "sessionID" in e:
        error = object_at(e, "error")
        message = text_of(object_at(error, "data").get("message")) or text_of(error.get("message"))
        name = text_of(error.get("name"))
        yield error_entry(f"{name}: {message}" if name and message else message or name or "error")


# What each request resends (adapters.request_size), measured on 1.18.33 with `bench/tokens.py
# --clis opencode --no-resume` against a provider it does not know (its own system prompt
# depends on the provider and model).
FIXED_PARTS = {"fake/fake-model": FixedPart(t25=21_400, defaults=30_600)}


class OpencodeSpec(CliAdapterSpec):
    name = "opencode"
    binary = "opencode"
    min_version, below_version, tested_version = "1.0.0", "1.19", "1.18.33"
    fixed_parts = FIXED_PARTS
    install_dirs = ("~/.opencode/bin",)  # its install script's
    login_files = (".local/share/opencode/auth.json",)
    # Stored credentials and provider keys in the environment, counted; about 1 s.
    login_probe = LoginProbe(("auth", "list"), auth_list, "opencode auth login")
    # What it reads from a project's tree: its config (MCP servers, providers, permissions),
    # its agents, commands and plugins, its instructions, and Claude Code's (CLAUDE.md and
    # skills, unless told not to).
    project_files = (
        "opencode.json",
        "opencode.jsonc",
        ".opencode/**",
        "AGENTS.md",
        "CLAUDE.md",
        ".claude/**",
    )
    transcript = EventShapes(
        _render,
        quiet=frozenset({"step_start", "step_finish"}),
        known=frozenset({"text", "tool_use"}),
    )
    login_env = (
        *NETWORK_ENV,
        "OPENCODE_CONFIG",
        "OPENCODE_CONFIG_CONTENT",
        "ANTHROPIC_API_KEY",
        "OPENAI_API_KEY",
        "GEMINI_API_KEY",
        "OPENROUTER_API_KEY",
    )
    # Its own service, and the providers whose keys it reads; a provider's `baseURL` in its
    # configuration takes their place (`base_urls`).
    vendor_hosts = (
        "opencode.ai",
        "api.anthropic.com",
        "api.openai.com",
        "generativelanguage.googleapis.com",
        "openrouter.ai",
    )
    owned_flags = ("--format",)
    capabilities = Capabilities(
        structured_output="--format json",
        usage=True,
        cost=True,
        resume="run --session ID",
        sandbox_flags="none (permissions from its config)",
        # OPENCODE_DISABLE_PROJECT_CONFIG drops the tree's opencode.json (its MCP servers,
        # providers, permissions) and AGENTS.md; 1.18.33 still runs .opencode/plugin/*.js
        # (measured), for which it has no switch.
        project_config_off="OPENCODE_DISABLE_PROJECT_CONFIG (not .opencode/plugin/)",
        tools="OPENCODE_PERMISSION: every tool denied but the role's",
    )

    def build_argv(self, request: AgentRequest, prompt: PromptArg) -> list[str]:
        argv = ["run", "--format", "json"]
        if request.model:  # provider/model
            argv += ["-m", request.model]
        if request.resume_session:
            argv += ["--session", request.resume_session]
        return [*argv, *request.args, "--", inline_prompt(prompt)]

    def extra_env(self, request: AgentRequest) -> dict[str, str]:
        # No update check, model catalogue, default plugins, LSP downloads or sharing: each
        # reaches for an outside host.
        return dict.fromkeys(
            (
                "OPENCODE_DISABLE_AUTOUPDATE",
                "OPENCODE_DISABLE_SHARE",
                "OPENCODE_DISABLE_MODELS_FETCH",
                "OPENCODE_DISABLE_DEFAULT_PLUGINS",
                "OPENCODE_DISABLE_LSP_DOWNLOAD",
            ),
            "1",
        )

    def base_urls(self, env: Mapping[str, str], args: Sequence[str]) -> list[str]:
        texts = [env.get("OPENCODE_CONFIG_CONTENT", "")]
        if path := env.get("OPENCODE_CONFIG"):
            try:
                texts.append(Path(path).expanduser().read_text(encoding="utf-8"))
            except (OSError, UnicodeDecodeError):
                pass
        return [url for text in texts for url in _BASE_URL.findall(text)]

    def tool_env(self, tools: frozenset[str] | None) -> dict[str, str]:
        if tools is None:
            return {}
        allowed = [key for kind in PERMISSIONS if kind in tools for key in PERMISSIONS[kind]]
        permission = {"*": "deny", **dict.fromkeys(allowed, "allow")}  # the last match wins
        return {"OPENCODE_PERMISSION": json.dumps(permission)}

    def isolated_env(self, request: AgentRequest) -> dict[str, str]:
        # And nothing from a .claude/ directory (its CLAUDE.md and skills).
        return {"OPENCODE_DISABLE_PROJECT_CONFIG": "1", "OPENCODE_DISABLE_CLAUDE_CODE": "1"}

    def config_problems(self, profile_model: str | None, args: list[str]) -> list[str]:
        problems = super().config_problems(profile_model, args)
        if profile_model and "/" not in profile_model:
            problems.append(f"model {profile_model!r}: opencode wants provider/model")
        return problems

    def parse(self, stdout: str) -> CliOutput:
        events = json_lines(stdout)
        parts = [(e.get("type"), e["part"]) for e in events if isinstance(e.get("part"), dict)]
        steps = [part for kind, part in parts if kind == "step_finish"]
        errors = [e.get("error") for e in events if e.get("type") == "error"]
        requests = tuple(map(_step, steps))  # one step, one model request
        return CliOutput(
            final_text=_final_text(parts),
            is_error=bool(errors),
            error=_error(errors[-1]) if errors else None,
            files_changed=_edited_files(parts),
            cost_usd=sum((number(step.get("cost")) or 0.0 for step in steps), 0.0),
            usage=summed(requests),
            requests=requests,
            session_id=next(
                (e["sessionID"] for e in events if isinstance(e.get("sessionID"), str)), None
            ),
        )


def _final_text(parts: list[tuple[object, JsonObject]]) -> str:
    """What it said after its last tool call."""
    text: list[str] = []
    for kind, part in parts:
        if kind == "tool_use":
            text = []
        elif kind == "text":
            text.append(text_of(part.get("text")))
    return "\n".join(t for t in text if t).strip()


def _edited_files(parts: list[tuple[object, JsonObject]]) -> tuple[str, ...]:
    calls = [
        part
        for kind, part in parts
        if kind == "tool_use" and text_of(part.get("tool")) in EDIT_TOOLS
    ]
    given = [object_at(object_at(call, "state"), "input") for call in calls]
    return tuple(g["filePath"] for g in given if isinstance(g.get("filePath"), str))


def _error(last: object) -> str:
    error = last if isinstance(last, dict) else {}
    message = object_at(error, "data").get("message")
    return text_of(message) or text_of(error.get("name")) or "opencode error"


def _step(step: JsonObject) -> Usage:
    """A `step_finish` part: the tokens of the one model request that step made."""
    tokens = object_at(step, "tokens")
    cache = object_at(tokens, "cache")
    return Usage(
        input_tokens=count_at(tokens, "input"),
        output_tokens=count_at(tokens, "output"),
        cache_read_tokens=count_at(cache, "read"),
        cache_write_tokens=count_at(cache, "write"),
    )
