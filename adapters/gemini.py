"""Gemini CLI (`gemini`): `gemini -o stream-json --yolo --prompt=TEXT`, one JSON event a line."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import ClassVar

from adapters.base import Capabilities, CliAdapterSpec, CliOutput, project_config_off
from adapters.base_prompt import base_prompt_file
from adapters.entries import (
    Entry,
    EventShapes,
    Kind,
    abridge,
    call,
    content_text,
    error_entry,
    message_entry,
    output,
    value_text,
)
from adapters.parsing import (
    JsonObject,
    count_at,
    json_lines,
    last_event,
    message_of,
    object_at,
    text_of,
)
from adapters.process import NETWORK_ENV
from adapters.prompt_files import PromptArg, inline_prompt
from adapters.request_size import FixedPart
from core.domain.agent import AgentRequest
from core.domain.models import Usage
from core.domain.tools import ordered

EDIT_TOOLS = {"write_file", "replace", "edit"}
# Policy files (user tier, so over --yolo) shipped with T25: `deny-all.toml` takes every tool
# away, built-in and MCP, and one file per tool class (core.domain.tools) allows its tools
# back. A tool denied outright is never declared to the model (0.61.0 by default declares 16:
# topics, skills, web fetch and search, todos, plan mode, sub-agents, background shells, ...).
POLICIES = Path(__file__).with_name("gemini_policies")
# API-key login, no telemetry, no update checks (see agent-cli-captures/gemini-settings.json).
# And no project-level agents, skills, hooks or `.env`: user-level defaults that only a
# trusted workspace's own settings can turn back on, which a later stage never reads.
HEADLESS_SETTINGS = json.dumps(
    {
        "security": {"auth": {"selectedType": "gemini-api-key"}},
        "privacy": {"usageStatisticsEnabled": False},
        "telemetry": {"enabled": False},
        "general": {"enableAutoUpdate": False, "enableAutoUpdateNotification": False},
        "advanced": {"ignoreLocalEnv": True},
        "experimental": {"enableAgents": False},
        "skills": {"enabled": False},
        "hooksConfig": {"enabled": False},
    },
    indent=2,
)

# What each request resends (adapters.request_size), measured on 0.61.0 with `bench/tokens.py
# --clis gemini --model M --no-resume`: its own system prompt and tools depend on the model
# (Gemini 3 gets another prompt); T25's base prompt does not.
FIXED_PARTS = {
    "gemini-2.5-pro": FixedPart(t25=12_200, defaults=44_300),
    "gemini-3.1-pro-preview": FixedPart(t25=9_900, defaults=41_800),
}


# -- its stream-json as a transcript (adapters.transcript) -----------------------------------


def _render(e: JsonObject) -> Iterator[Entry]:
    """Its session start, messages, tool calls and results, and its final result."""
    kind = e.get("type")
    if kind == "init":
        yield Entry(Kind.INFO, f"session started · model {text_of(e.get('model')) or '?'}")
    elif kind == "message":
        text = content_text(e.get("content"))
        if e.get("role") == "assistant":
            yield message_entry(text)
        else:
            yield Entry(Kind.INFO, f"{text_of(e.get('role')) or 'user'}: " + abridge(text, 200))
    elif kind == "tool_use" and "tool_name" in e:
        yield Entry(Kind.CALL, call(text_of(e.get("tool_name")), e.get("parameters")))
    elif kind == "tool_result" and "tool_id" in e:
        status = text_of(e.get("status")) or "done"
        error = e.get("error")
        if error or status == "error":
            yield error_entry(
                text_of(object_at(e, "error").get("message")) or value_text(error) or status
            )
        else:
            printed = text_of(e.get("output"))
            yield Entry(Kind.RESULT, output(printed) if printed else status)
    elif kind == "result" and "stats" in e:
        stats = object_at(e, "stats")
        if e.get("status") == "error":
            yield error_entry(text_of(object_at(e, "error").get("message")) or "the run failed")
        yield Entry(
            Kind.INFO,
            f"finished: {text_of(e.get('status')) or 'done'} · tokens in "
            f"{stats.get('input_tokens', 0)} out {stats.get('output_tokens', 0)}",
        )
    elif kind == "error" and "message" in e and "sessionID" not in e:
        yield error_entry(text_of(e.get("message")))


class GeminiSpec(CliAdapterSpec):
    name = "gemini"
    binary = "gemini"
    min_version, below_version, tested_version = "0.50.0", "0.62", "0.61.0"
    init_models = ("gemini-3.1-pro-preview", "gemini-3.8-flash")
    login_files = (".gemini/oauth_creds.json", ".gemini/google_accounts.json")
    # What it reads from a project's tree: its settings (MCP servers, hooks, tools), commands,
    # agents, skills and policies, its context files (at any depth), its ignore file, and the
    # `.env` it loads into its environment.
    project_files = (".gemini/**", "GEMINI.md", ".geminiignore", ".env")
    transcript = EventShapes(
        _render, known=frozenset({"message", "tool_use", "tool_result", "init", "result"})
    )
    login_env = (
        *NETWORK_ENV,
        "GEMINI_API_KEY",
        "GOOGLE_API_KEY",
        "GOOGLE_GEMINI_BASE_URL",
        "GOOGLE_CLOUD_PROJECT",
        "GOOGLE_CLOUD_LOCATION",
        "GOOGLE_GENAI_USE_VERTEXAI",
        "GOOGLE_APPLICATION_CREDENTIALS",
    )
    base_url_env = ("GOOGLE_GEMINI_BASE_URL",)
    # The Gemini API, and Code Assist with its OAuth token endpoint for a Google login.
    vendor_hosts = (
        "generativelanguage.googleapis.com",
        "cloudcode-pa.googleapis.com",
        "oauth2.googleapis.com",
    )
    owned_flags = ("-o", "--output-format", "-p", "--prompt")
    capabilities = Capabilities(
        structured_output="-o stream-json",
        usage=True,
        cost=False,
        # 0.61's --resume takes `latest` or an index in the project's list, not a session
        # id: another run in the same worktree may have become `latest` meanwhile.
        resume="no (--resume takes latest or an index, not a session id)",
        sandbox_flags="--yolo",
        # Headless 0.61 refuses an untrusted folder outright; `--skip-trust` without
        # GEMINI_CLI_TRUST_WORKSPACE reads settings before it trusts, so the worktree's
        # .gemini/settings.json (MCP servers, hooks, tools) is never loaded (measured). Its
        # agents, skills and .env stay off only through the private HOME's settings.
        project_config_off="--skip-trust, no GEMINI_CLI_TRUST_WORKSPACE",
        tools="--policy files: every tool denied but the role's",
    )
    home_files: ClassVar[dict[str, str]] = {".gemini/settings.json": HEADLESS_SETTINGS}
    fixed_parts = FIXED_PARTS

    def build_argv(self, request: AgentRequest, prompt: PromptArg) -> list[str]:
        argv = [
            "-o",
            "stream-json",
            "--yolo",
            *self.later_args(request),
            *self.tool_args(request.tools),
        ]
        if request.model:  # with a model named, it skips a routing call
            argv += ["-m", request.model]
        # `--prompt=TEXT` keeps a prompt that starts with dashes a value, not an option.
        return [*argv, *request.args, f"--prompt={inline_prompt(prompt)}"]

    def extra_env(self, request: AgentRequest) -> dict[str, str]:
        # The dev stage works a tree checked out from the default branch: its project
        # settings are the project's own. Every later stage's tree holds what an agent wrote.
        return {} if project_config_off(request) else {"GEMINI_CLI_TRUST_WORKSPACE": "true"}

    def tool_args(self, tools: frozenset[str] | None) -> list[str]:
        if tools is None:
            return []
        files = ["deny-all", *ordered(tools)]
        return [arg for name in files for arg in ("--policy", str(POLICIES / f"{name}.toml"))]

    def tool_env(self, tools: frozenset[str] | None) -> dict[str, str]:
        # Its own system prompt (~21 KB in every request, written for a person at a terminal)
        # gives way to T25's few hundred bytes for the role (adapters.base_prompt): the file
        # GEMINI_SYSTEM_MD names replaces it whole (its GEMINI.md context still follows).
        return {} if tools is None else {"GEMINI_SYSTEM_MD": str(base_prompt_file(tools))}

    def isolated_args(self, request: AgentRequest) -> list[str]:
        return ["--skip-trust"]

    def parse(self, stdout: str) -> CliOutput:
        events = json_lines(stdout)
        result = last_event(events, "result") or {}
        is_error = result.get("status") == "error"
        return CliOutput(
            final_text=_final_text(events),
            is_error=is_error,
            error=(message_of(result.get("error")) or "gemini reported an error")
            if is_error
            else None,
            files_changed=_edited_files(events),
            usage=_usage(object_at(result, "stats")),
            requests=_models(object_at(result, "stats")),
        )


def _final_text(events: list[JsonObject]) -> str:
    """The assistant's text after its last tool call."""
    text: list[str] = []
    for event in events:
        if event.get("type") in ("tool_use", "tool_result"):
            text = []
        elif event.get("type") == "message" and event.get("role") == "assistant":
            text.append(text_of(event.get("content")))
    return "".join(text).strip()


def _edited_files(events: list[JsonObject]) -> tuple[str, ...]:
    calls = [
        e
        for e in events
        if e.get("type") == "tool_use" and text_of(e.get("tool_name")) in EDIT_TOOLS
    ]
    given = [object_at(c, "parameters") for c in calls]
    return tuple(g["file_path"] for g in given if isinstance(g.get("file_path"), str))


def _usage(stats: JsonObject) -> Usage:
    """The run's tokens (cached ones apart), and the model that used the most of them."""
    models = object_at(stats, "models")
    used = {m: count_at(v, "total_tokens") for m, v in models.items() if isinstance(v, dict)}
    model = max((m for m in used if used[m]), key=used.__getitem__, default=None)
    cached = count_at(stats, "cached")
    return Usage(
        input_tokens=max(count_at(stats, "input_tokens") - cached, 0),
        output_tokens=count_at(stats, "output_tokens"),
        cache_read_tokens=cached,
        model=model,
    )


def _models(stats: JsonObject) -> tuple[Usage, ...]:
    """Its tokens per model, from `result.stats`: totals per model are the finest it reports
    (a run's routing call and its main model's turns apart)."""
    entries = []
    for model, counts in object_at(stats, "models").items():
        if not isinstance(counts, dict):
            continue
        cached = count_at(counts, "cached")
        entries.append(
            Usage(
                input_tokens=max(count_at(counts, "input_tokens") - cached, 0),
                output_tokens=count_at(counts, "output_tokens"),
                cache_read_tokens=cached,
                model=model,
            )
        )
    return tuple(entries)
