"""Codex CLI (`codex`): `codex exec --json -C DIR`, one JSON event a line."""

from __future__ import annotations

import json
import re
from collections.abc import Iterator, Mapping, Sequence
from pathlib import Path
from typing import ClassVar

from adapters.base import Capabilities, CliAdapterSpec, CliOutput
from adapters.base_prompt import base_prompt_file
from adapters.entries import (
    Entry,
    EventShapes,
    Kind,
    abridge,
    call,
    error_entry,
    message_entry,
    output,
    value_text,
)
from adapters.login import LoginProbe
from adapters.parsing import (
    JsonObject,
    count,
    json_lines,
    last_event,
    list_at,
    message_of,
    object_at,
    text_of,
)
from adapters.process import NETWORK_ENV
from adapters.prompt_files import PromptArg, inline_prompt
from adapters.request_size import FixedPart
from core.domain.agent import AgentRequest
from core.domain.models import Usage
from core.domain.tools import read_only

_BASE_URL = re.compile(r"""base_url\s*=\s*["']([^"']+)["']""")

# Headless and quiet: no update check, no analytics, no plugins (each reaches for a host).
HEADLESS_CONFIG = """\
approval_policy = "never"
sandbox_mode = "workspace-write"
check_for_update_on_startup = false

[analytics]
enabled = false

[features]
plugins = false
remote_plugin = false
apps = false
tool_suggest = false

[otel]
exporter = "none"
metrics_exporter = "none"
trace_exporter = "none"
"""

# Codex's own overhead, switched off whenever T25 sets the tools (measured on 0.171.0 against
# the fake model: one request's instructions and tool schemas, 36 KB by default).
OVERHEAD_ARGS = (
    # The goal tools (get_goal, create_goal, update_goal; ~3.3 KB): a stage's goal is its prompt.
    *("--disable", "goals"),
    # The list of bundled skills (image generation, OpenAI docs, skill installer; ~4.8 KB).
    *("-c", "skills.include_instructions=false"),
    # request_user_input (~1.4 KB): nobody answers a headless run.
    *("-c", "tools.experimental_request_user_input.enabled=false"),
    # web_search: a stage works from its worktree and its prompt, not the web.
    *("-c", 'web_search="disabled"'),
    # tool_search and the sub-agents' tool namespace (~0.8 KB): a stage is one agent.
    *("--disable", "multi_agent"),
    # The sandbox and approval section (~0.6 KB): inside T25's bubblewrap it describes Codex's
    # danger-full-access, not what the run may do; the base prompt says that.
    *("-c", "include_permissions_instructions=false"),
    # The environment context (~0.6 KB in every request: working directory, shell, date,
    # sandbox profile): the base prompt says the run works in its current directory.
    *("-c", "include_environment_context=false"),
)

# What each request resends (adapters.request_size), measured on 0.171.0 with `bench/tokens.py
# --clis codex --model M --no-resume`: Codex's own instructions and tools depend on the model;
# T25's base prompt does not.
FIXED_PARTS = {
    "gpt-5.5": FixedPart(t25=4_200, defaults=35_900),
    "gpt-5-codex": FixedPart(t25=3_400, defaults=38_400),
}


def login_status(code: int, out: str, err: str) -> bool | None:
    """`codex login status`: exit 0 and "Logged in using …", or exit 1 and "Not logged in"
    (either stream)."""
    said = f"{out}\n{err}".lower()
    if "not logged in" in said:
        return False
    return True if code == 0 and "logged in" in said else None


# -- its `exec --json` events as a transcript (adapters.transcript) --------------------------


def _render(e: JsonObject) -> Iterator[Entry]:
    """Its thread and turns, and the items of a turn as they start and complete."""
    kind = text_of(e.get("type"))
    if kind == "thread.started":
        yield Entry(Kind.INFO, "session started")
    elif kind == "turn.completed":
        usage = object_at(e, "usage")
        yield Entry(
            Kind.INFO,
            f"turn finished · tokens in {usage.get('input_tokens', 0)} "
            f"out {usage.get('output_tokens', 0)}",
        )
    elif kind == "turn.failed":
        yield error_entry(text_of(object_at(e, "error").get("message")) or "the turn failed")
    elif kind == "error" and "message" in e:
        yield error_entry(text_of(e.get("message")))
    elif kind in ("item.started", "item.completed"):
        yield from _item(object_at(e, "item"), done=kind == "item.completed")


def _item(item: JsonObject, *, done: bool) -> Iterator[Entry]:
    """One item: a command, a file change, an MCP or web call, a message, its reasoning."""
    kind = item.get("type")
    if kind == "command_execution":
        if not done:
            yield Entry(Kind.CALL, call("shell", {"command": item.get("command")}))
        else:
            code = item.get("exit_code")
            shown = output(text_of(item.get("aggregated_output")))
            yield Entry(Kind.RESULT if code in (0, None) else Kind.ERROR, f"exit {code}: {shown}")
    elif kind == "file_change" and done:
        changes = [
            f"{c.get('kind', '?')} {c.get('path', '?')}"
            for c in list_at(item, "changes")
            if isinstance(c, dict)
        ]
        yield Entry(Kind.CALL, call("edit", ", ".join(changes)))
    elif kind == "mcp_tool_call" and not done:
        name = f"{text_of(item.get('server'))}.{text_of(item.get('tool'))}"
        yield Entry(Kind.CALL, call(name, item.get("arguments")))
    elif kind == "mcp_tool_call" and done:
        yield Entry(Kind.RESULT, output(value_text(item.get("result") or item.get("error") or "")))
    elif kind == "web_search" and not done:
        yield Entry(Kind.CALL, call("web_search", {"query": item.get("query")}))
    elif kind == "agent_message" and done:
        yield message_entry(text_of(item.get("text")))
    elif kind == "reasoning" and done:
        yield Entry(Kind.INFO, "thinking: " + abridge(text_of(item.get("text")), 200))
    elif kind == "error":
        yield error_entry(text_of(item.get("message")))


class CodexSpec(CliAdapterSpec):
    name = "codex"
    binary = "codex"
    min_version, below_version, tested_version = "0.160.0", "0.172", "0.171.0"
    init_models = ("gpt-5.5", "gpt-5-codex")
    login_files = (".codex/auth.json",)
    login_probe = LoginProbe(("login", "status"), login_status, "codex login")  # reads ~/.codex
    # What it reads from a project's tree: its config (MCP servers, hooks, exec rules) and
    # skills, and its instructions (at any depth).
    project_files = (".codex/**", "AGENTS.md", "AGENTS.override.md")
    transcript = EventShapes(
        _render,
        quiet=frozenset({"turn.started", "item.updated"}),
        known=frozenset({"item.started", "item.completed"}),
    )
    login_env = (*NETWORK_ENV, "OPENAI_API_KEY", "OPENAI_BASE_URL", "CODEX_HOME")
    base_url_env = ("OPENAI_BASE_URL",)
    vendor_hosts = ("api.openai.com", "chatgpt.com")  # an API key; a ChatGPT login
    owned_flags = ("--json", "-C", "--cd")
    capabilities = Capabilities(
        structured_output="--json",
        usage=True,
        cost=False,
        resume="exec resume SESSION_ID",
        sandbox_flags="--sandbox workspace-write (in bubblewrap: T25's)",
        # Codex loads a project's .codex/config.toml (MCP servers, hooks, exec rules) only in
        # a trusted project; the run marks the tree and the folders above it untrusted, over
        # whatever the user's config trusts (measured on 0.171: a planted server then never
        # starts). Skills under the tree still load: instructions, which run nothing.
        project_config_off="-c projects=<tree and parents untrusted>",
        # Its shell reads as well as writes: no tool can be taken away by class, but its own
        # sandbox refuses every write of a read-only role (apply_patch and shell alike).
        tools="read-only roles: --sandbox read-only, or a read-only worktree in T25's bubblewrap",
    )
    home_files: ClassVar[dict[str, str]] = {".codex/config.toml": HEADLESS_CONFIG}
    fixed_parts = FIXED_PARTS

    def build_argv(self, request: AgentRequest, prompt: PromptArg) -> list[str]:
        argv = [
            "exec",
            "--json",
            "-C",
            str(request.cwd),
            *self.tool_args(request.tools),
            "-c",
            "check_for_update_on_startup=false",
            "-c",
            "analytics.enabled=false",
            *self.later_args(request),
        ]
        if request.model:
            argv += ["-m", request.model]
        # `exec resume` takes the options of `exec` before it, and none of its own but these.
        resume = ["resume", request.resume_session] if request.resume_session else []
        return [*argv, *request.args, *resume, "--", inline_prompt(prompt)]

    def tool_args(self, tools: frozenset[str] | None) -> list[str]:
        # Writes confined to the worktree for any role that edits or runs commands; none at
        # all for a role that only reads and searches. The CLI's defaults keep workspace-write:
        # T25 never runs Codex without its sandbox.
        sandbox = "read-only" if read_only(tools) else "workspace-write"
        if tools is None:
            return ["--sandbox", sandbox]
        # Codex's own base instructions (~21 KB in every request, written for a person at a
        # terminal) give way to T25's few hundred bytes for the role (adapters.base_prompt).
        instructions = f"model_instructions_file={json.dumps(str(base_prompt_file(tools)))}"
        return ["--sandbox", sandbox, *OVERHEAD_ARGS, "-c", instructions]

    def confined_args(self, argv: list[str]) -> list[str]:
        # Codex's own sandbox is bubblewrap too, and cannot start inside T25's: it must mount
        # a /proc, which a run without capabilities, under a /proc with covered parts, may not
        # (measured on 0.171: every write and command fails). T25's sandbox is the wall; a
        # role that may write nothing gets a read-only worktree from it instead.
        at = argv.index("--sandbox")
        return [*argv[:at], "--sandbox", "danger-full-access", *argv[at + 2 :]]

    def isolated_args(self, request: AgentRequest) -> list[str]:
        return ["-c", f"projects={untrusted_projects(request.cwd)}"]

    def base_urls(self, env: Mapping[str, str], args: Sequence[str]) -> list[str]:
        # A provider's `base_url`, given with `-c model_providers.NAME={...}` or in the
        # config.toml of the CODEX_HOME the run uses.
        urls = super().base_urls(env, args)
        urls += [url for arg in args for url in _BASE_URL.findall(arg)]
        config = Path(env.get("CODEX_HOME") or Path(env.get("HOME", "~")) / ".codex")
        try:
            text = (config.expanduser() / "config.toml").read_text(encoding="utf-8")
        except (OSError, UnicodeDecodeError):
            return urls
        return urls + _BASE_URL.findall(text)

    def home_env(self, home: Path) -> dict[str, str]:
        return {"CODEX_HOME": str(home / ".codex")}

    def parse(self, stdout: str) -> CliOutput:
        events = json_lines(stdout)
        items = [
            e["item"]
            for e in events
            if e.get("type") == "item.completed" and isinstance(e.get("item"), dict)
        ]
        messages = [text_of(i.get("text")) for i in items if i.get("type") == "agent_message"]
        failed = last_event(events, "turn.failed")
        done = last_event(events, "turn.completed") or {}
        return CliOutput(
            final_text=messages[-1] if messages else "",
            is_error=failed is not None,
            error=(message_of(failed.get("error")) or "the turn failed") if failed else None,
            usage=_usage(done.get("usage"), None),
            files_changed=_changed_files(items),
            requests=_turns(events),
            session_id=_thread(events),
        )


def untrusted_projects(cwd: Path) -> str:
    """A TOML inline table marking as untrusted every folder Codex may take the tree's trust
    from: the tree, its main repository's checkout (a linked worktree's trust is its
    repository's) and every folder above either."""
    folders: dict[str, None] = {}
    for start in (cwd, *_main_checkout(cwd)):
        for folder in (start, *start.parents):
            folders[str(folder)] = None
    # A JSON string is a valid TOML basic string.
    return "{" + ", ".join(f'{json.dumps(f)}={{trust_level="untrusted"}}' for f in folders) + "}"


def _main_checkout(cwd: Path) -> list[Path]:
    """The main checkout of the repository whose linked worktree `cwd` is, if it is one."""
    try:
        line = (cwd / ".git").read_text(encoding="utf-8").strip()
    except (OSError, UnicodeDecodeError):  # a directory (a main checkout), or no repository
        return []
    if not line.startswith("gitdir:"):
        return []
    gitdir = (cwd / line.removeprefix("gitdir:").strip()).resolve()
    try:
        common = (gitdir / (gitdir / "commondir").read_text(encoding="utf-8").strip()).resolve()
    except (OSError, UnicodeDecodeError):
        return []
    return [common.parent]


def _thread(events: list[JsonObject]) -> str | None:
    """The thread (session) id of `thread.started`: what `exec resume` takes. A resume of a
    thread that is gone prints no event (0.171: "no rollout found for thread id")."""
    started = next((e for e in events if e.get("type") == "thread.started"), {})
    found = started.get("thread_id")
    return found if isinstance(found, str) and found else None


def _changed_files(items: list[JsonObject]) -> tuple[str, ...]:
    changes = [c for i in items if i.get("type") == "file_change" for c in list_at(i, "changes")]
    return tuple(
        c["path"] for c in changes if isinstance(c, dict) and isinstance(c.get("path"), str)
    )


def _usage(usage: object, model: str | None) -> Usage:
    """The usage of a `turn.completed`: cached input counted apart from the rest."""
    counts = usage if isinstance(usage, dict) else {}

    def first(*keys: str) -> int:  # the first of `keys` that holds a count
        given = (counts[k] for k in keys if type(counts.get(k)) is int and counts[k] >= 0)
        return count(next(given, 0))

    cached = first("cached_input_tokens")
    return Usage(
        input_tokens=max(first("input_tokens", "prompt_tokens") - cached, 0),
        output_tokens=first("output_tokens", "completion_tokens"),
        cache_read_tokens=cached,
        cache_write_tokens=first("cache_write_input_tokens"),
        model=model,
    )


def _turns(events: list[JsonObject]) -> tuple[Usage, ...]:
    """Codex's `exec --json`: one usage per `turn.completed`, which sums the model requests of
    that turn (Codex reports none finer)."""
    return tuple(_usage(e.get("usage"), None) for e in events if e.get("type") == "turn.completed")
