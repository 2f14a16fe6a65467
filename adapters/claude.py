"""Claude Code (`claude`): `claude -p --output-format stream-json --verbose`, one JSON event a line."""

from __future__ import annotations

import json
import os
from collections.abc import Iterator

from adapters.base import Capabilities, CliAdapterSpec, CliOutput
from adapters.entries import (
    CALL_CHARS,
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
from adapters.login import LoginProbe
from adapters.parsing import (
    JsonObject,
    anthropic_usage,
    epoch,
    json_lines,
    last_event,
    list_at,
    number,
    object_at,
    text_of,
)
from adapters.process import NETWORK_ENV
from adapters.prompt_files import PromptArg, inline_prompt
from adapters.request_size import FixedPart
from core.domain.agent import AgentRequest
from core.domain.models import Usage

EDIT_TOOLS = {"Write", "Edit", "MultiEdit", "NotebookEdit"}

# Each tool class (core.domain.tools) as Claude Code's built-in tools, for `--tools`. Every
# other built-in (Agent, Cron*, Task*, Workflow, ScheduleWakeup, EnterWorktree, WebFetch,
# WebSearch, NotebookEdit, Skill, ...) is left out: 2.1.197 sends 24 tool schemas by default.
TOOLS = {
    "read": ("Read",),
    "search": ("Grep", "Glob"),
    "edit": ("Write", "Edit"),
    "shell": ("Bash",),
}
# Claude Code's own overhead, switched off whenever T25 narrows the tools (measured on
# 2.1.197 against the fake model; bytes of one request's system prompt and tool schemas).
OVERHEAD_ENV = {
    # The auto-memory section (~13 KB of system prompt): memory kept under HOME across
    # sessions means nothing to one run in a throwaway worktree, often with a private HOME.
    "CLAUDE_CODE_DISABLE_AUTO_MEMORY": "1",
    # The commit and pull-request instructions (~6 KB, most of them in Bash's schema): T25
    # commits the worktree and opens the pull request itself; an agent never does.
    "CLAUDE_CODE_DISABLE_GIT_INSTRUCTIONS": "1",
    # Bash's `run_in_background` (~0.5 KB): a shell left running after the run ends is what
    # T25's supervision kills; a stage waits for its commands.
    "CLAUDE_CODE_DISABLE_BACKGROUND_TASKS": "1",
}
# The per-machine sections (working directory, git status, environment) move from the system
# prompt into the first user message, so the system prompt is the same for every worktree
# and the provider's prompt cache serves it across tasks (in the pinned version's --help).
OVERHEAD_ARGS = ("--exclude-dynamic-system-prompt-sections",)

# What each request resends (adapters.request_size), measured on 2.1.197 with `bench/tokens.py
# --clis claude --model M --no-resume`. Its system prompt depends on the model: 27 KB with its
# defaults (12.8 KB under T25) for sonnet, haiku and claude-opus-4-5 to 4-7; 6.4 KB (3.4 KB)
# for claude-opus-4-8, 4-0 and 4-1 and a model it does not know. Its aliases send what the
# model they stand for sends (one run each: `opus` is claude-opus-4-8).
_SONNET = FixedPart(t25=27_600, defaults=108_600)
_OPUS = FixedPart(t25=12_600, defaults=69_700)
FIXED_PARTS = {
    "claude-sonnet-4-5": _SONNET,
    "sonnet": _SONNET,
    "claude-opus-4-8": _OPUS,
    "opus": _OPUS,
}
FIXED_PART_NOTE = (
    "its system prompt depends on the model: 6 KB to 27 KB with its defaults, 3 KB to 13 KB "
    "under T25"
)


def auth_status(code: int, out: str, err: str) -> bool | None:
    """`claude auth status` prints JSON: {"loggedIn": true|false, "authMethod": …}."""
    try:
        said = json.loads(out)
    except ValueError:
        return None
    logged_in = said.get("loggedIn") if isinstance(said, dict) else None
    return logged_in if isinstance(logged_in, bool) else None


# -- its stream-json as a transcript (adapters.transcript) -----------------------------------


def _render(e: JsonObject) -> Iterator[Entry]:
    """Its session start, messages, thinking, tool calls and results, and its final result
    (the scripted agent's system and result lines have the same shape)."""
    kind = e.get("type")
    if kind == "system" and e.get("subtype") == "init":
        model = text_of(e.get("model")) or "?"
        yield Entry(
            Kind.INFO, f"session started · model {model} · {len(list_at(e, 'tools'))} tools"
        )
    elif kind == "system":
        rest = {k: v for k, v in e.items() if k not in ("type", "subtype", "session_id", "uuid")}
        yield Entry(
            Kind.INFO, abridge(f"{e.get('subtype') or 'system'} {value_text(rest)}", CALL_CHARS)
        )
    elif kind == "assistant":
        for block in list_at(object_at(e, "message"), "content"):
            if not isinstance(block, dict):
                continue
            if block.get("type") == "text":
                yield message_entry(text_of(block.get("text")))
            elif block.get("type") == "thinking":
                yield Entry(Kind.INFO, "thinking: " + abridge(text_of(block.get("thinking")), 200))
            elif block.get("type") == "tool_use":
                yield Entry(Kind.CALL, call(text_of(block.get("name")), block.get("input")))
    elif kind == "user":
        for block in list_at(object_at(e, "message"), "content"):
            if isinstance(block, dict) and block.get("type") == "tool_result":
                text = output(content_text(block.get("content")))
                if block.get("is_error"):
                    yield error_entry(text)
                else:
                    yield Entry(Kind.RESULT, text)
    elif kind == "result" and ("subtype" in e or "num_turns" in e):
        yield from _finished(e)


def _finished(e: JsonObject) -> Iterator[Entry]:
    """The `result` line: how the run ended, its turns and its cost."""
    what = "error" if e.get("is_error") else text_of(e.get("subtype")) or "done"
    turns = e.get("num_turns")
    cost = e.get("total_cost_usd")
    facts = [what]
    if isinstance(turns, int):
        facts.append(f"{turns} turn{'s' if turns != 1 else ''}")
    if isinstance(cost, int | float) and not isinstance(cost, bool):
        facts.append(f"${cost:.4f}")
    if e.get("is_error"):
        yield error_entry(text_of(e.get("result")) or what)
    yield Entry(Kind.INFO, "finished: " + " · ".join(facts))


class ClaudeSpec(CliAdapterSpec):
    name = "claude"
    binary = "claude"
    min_version, below_version, tested_version = "2.0.0", "2.2", "2.1.197"
    init_models = ("sonnet", "opus")  # its own aliases: they follow its releases
    fixed_parts, fixed_part_note = FIXED_PARTS, FIXED_PART_NOTE
    login_files = (".claude/.credentials.json",)
    # JSON, offline, ~0.4 s
    login_probe = LoginProbe(("auth", "status"), auth_status, "claude auth login")
    # What it reads from a project's tree: its settings, hooks, commands, agents and skills,
    # its MCP servers, and its memory files (at any depth).
    project_files = (".claude/**", ".mcp.json", "CLAUDE.md", "CLAUDE.local.md")
    transcript = EventShapes(
        _render,
        quiet=frozenset({"stream_event", "rate_limit"}),
        known=frozenset({"assistant", "user", "system", "result"}),
    )
    login_env = (
        *NETWORK_ENV,
        "ANTHROPIC_API_KEY",
        "ANTHROPIC_AUTH_TOKEN",
        "ANTHROPIC_BASE_URL",
        "CLAUDE_CODE_OAUTH_TOKEN",
        "CLAUDE_CONFIG_DIR",
    )
    base_url_env = ("ANTHROPIC_BASE_URL",)
    vendor_hosts = ("api.anthropic.com",)
    owned_flags = ("-p", "--print", "--output-format", "--verbose")
    capabilities = Capabilities(
        structured_output="stream-json",
        usage=True,
        cost=True,
        resume="--resume SESSION_ID",
        sandbox_flags="--dangerously-skip-permissions",
        # Measured on 2.1.197: the worktree's .claude/settings.json (hooks, apiKeyHelper, env
        # such as ANTHROPIC_BASE_URL) and .mcp.json servers run without these; with them, none.
        project_config_off="--setting-sources user --strict-mcp-config",
        tools="--tools (exact built-ins) and overhead switched off",
    )

    def build_argv(self, request: AgentRequest, prompt: PromptArg) -> list[str]:
        argv = [
            "-p",
            "--output-format",
            "stream-json",
            "--verbose",
            "--dangerously-skip-permissions",
            *self.later_args(request),
            *self.tool_args(request.tools),
        ]
        if request.model:
            argv += ["--model", request.model]
        if request.resume_session:  # the same session goes on (its id stays)
            argv += ["--resume", request.resume_session]
        return [*argv, *request.args, "--", inline_prompt(prompt)]

    def tool_args(self, tools: frozenset[str] | None) -> list[str]:
        if tools is None:
            return []
        names = [name for kind in TOOLS for name in TOOLS[kind] if kind in tools]
        # `--tools ""` offers no tool at all; a listed name is the only way one is offered.
        # `--tools` names built-ins only: an MCP server's tools, from the user's or the
        # project's configuration, are outside every class and go with `--strict-mcp-config`.
        return ["--tools", ",".join(names), "--strict-mcp-config", *OVERHEAD_ARGS]

    def tool_env(self, tools: frozenset[str] | None) -> dict[str, str]:
        return {} if tools is None else dict(OVERHEAD_ENV)

    def isolated_args(self, request: AgentRequest) -> list[str]:
        # Only the user's settings (the private HOME's, or the operator's own), and no MCP
        # server but those given on the command line (none).
        return ["--setting-sources", "user", "--strict-mcp-config"]

    def extra_env(self, request: AgentRequest) -> dict[str, str]:
        env = {
            "CLAUDE_CODE_MAX_RETRIES": "0",  # T25 retries overloads and falls back on quota
            "CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC": "1",
            "DISABLE_TELEMETRY": "1",
            "DISABLE_AUTOUPDATER": "1",
            "DISABLE_ERROR_REPORTING": "1",
        }
        if os.geteuid() == 0:  # as root it refuses to skip permissions unless told it is boxed
            env["IS_SANDBOX"] = "1"
        return env

    def parse(self, stdout: str) -> CliOutput:
        events = json_lines(stdout)
        result = last_event(events, "result") or {}
        init = next((e for e in events if e.get("subtype") == "init"), {})
        limit = object_at(last_event(events, "rate_limit_event") or {}, "rate_limit_info")
        is_error = result.get("is_error") is True  # trust is_error, not subtype
        return CliOutput(
            final_text=text_of(result.get("result")),
            is_error=is_error,
            error=_error(result) if is_error else None,
            usage=anthropic_usage(result.get("usage"), _model(result, init)),
            files_changed=_edited_files(events),
            resets_at=epoch(limit.get("resetsAt")) if limit.get("status") == "rejected" else None,
            cost_usd=number(result.get("total_cost_usd")),
            requests=_requests(events),
            session_id=_session(init, result),
        )


def _model(result: JsonObject, init: JsonObject) -> str | None:
    """The model that wrote most of the answer, else the one the session started with."""
    models = object_at(result, "modelUsage")
    busiest = max(models, key=lambda m: _output_tokens(models[m]), default=None)
    return busiest or text_of(init.get("model")) or None


def _session(init: JsonObject, result: JsonObject) -> str | None:
    """The session the run took place in: its `init` event's. A run that failed before it
    began has none; its `result` then names the session it was asked to resume, which may
    not exist (2.1.197: "No conversation found with session ID")."""
    found = init.get("session_id") or (None if result.get("is_error") else result.get("session_id"))
    return found if isinstance(found, str) and found else None


def _edited_files(events: list[JsonObject]) -> tuple[str, ...]:
    """The files the edit tools were called on, in order."""
    calls = [
        block
        for e in events
        if e.get("type") == "assistant"
        for block in list_at(object_at(e, "message"), "content")
        if isinstance(block, dict) and block.get("type") == "tool_use"
    ]
    given = [object_at(c, "input") for c in calls if text_of(c.get("name")) in EDIT_TOOLS]
    return tuple(g["file_path"] for g in given if isinstance(g.get("file_path"), str))


def _error(result: JsonObject) -> str:
    return (
        text_of(result.get("result"))
        or "; ".join(map(str, list_at(result, "errors")))
        or text_of(result.get("subtype"))
    )


def _output_tokens(entry: object) -> int:
    value = entry.get("outputTokens") if isinstance(entry, dict) else None
    return value if type(value) is int else 0


SYNTHETIC_MODEL = "<synthetic>"  # Claude Code's own messages (an API error it relays): no request


def _requests(events: list[JsonObject]) -> tuple[Usage, ...]:
    """Claude Code's stream-json: each `assistant` event carries its message's usage, and a
    message with several content blocks is printed once per block, so a message id counts
    once (its last report). The output counts are those Claude Code prints while the message
    streams, often lower than the result's total."""
    by_message: dict[object, Usage] = {}
    for n, event in enumerate(events):
        message = object_at(event, "message")
        model = text_of(message.get("model"))
        if event.get("type") != "assistant" or "usage" not in message or model == SYNTHETIC_MODEL:
            continue
        key = message.get("id") if isinstance(message.get("id"), str) else n
        by_message[key] = anthropic_usage(message["usage"], model or None)
    return tuple(by_message.values())
