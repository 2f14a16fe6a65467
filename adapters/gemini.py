"""Gemini CLI (`gemini`): `gemini -o stream-json --yolo --prompt=TEXT`, one JSON event a line."""

from __future__ import annotations

import json
from typing import ClassVar

from adapters.base import Capabilities, CliAdapterSpec, CliOutput, PromptArg, inline_prompt
from adapters.parsing import count_at, json_lines, last_event, object_at, text_of
from adapters.process import NETWORK_ENV
from core.domain.agent import AgentRequest
from core.domain.models import Usage

EDIT_TOOLS = {"write_file", "replace", "edit"}
# API-key login, no telemetry, no update checks (see agent-cli-captures/gemini-settings.json).
HEADLESS_SETTINGS = json.dumps(
    {
        "security": {"auth": {"selectedType": "gemini-api-key"}},
        "privacy": {"usageStatisticsEnabled": False},
        "telemetry": {"enabled": False},
        "general": {"enableAutoUpdate": False, "enableAutoUpdateNotification": False},
    },
    indent=2,
)


class GeminiSpec(CliAdapterSpec):
    name = "gemini"
    binary = "gemini"
    min_version, below_version, tested_version = "0.50.0", "0.62", "0.61.0"
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
    owned_flags = ("-o", "--output-format", "-p", "--prompt")
    capabilities = Capabilities(
        structured_output="-o stream-json",
        usage=True,
        cost=False,
        resume="--resume SESSION",
        sandbox_flags="--yolo",
    )
    home_files: ClassVar[dict[str, str]] = {".gemini/settings.json": HEADLESS_SETTINGS}

    def build_argv(self, request: AgentRequest, prompt: PromptArg) -> list[str]:
        argv = ["-o", "stream-json", "--yolo"]
        if request.model:  # with a model named, it skips a routing call
            argv += ["-m", request.model]
        # `--prompt=TEXT` keeps a prompt that starts with dashes a value, not an option.
        return [*argv, *request.args, f"--prompt={inline_prompt(prompt)}"]

    def extra_env(self, request: AgentRequest) -> dict[str, str]:
        return {"GEMINI_CLI_TRUST_WORKSPACE": "true"}

    def parse(self, stdout: str) -> CliOutput:
        events = json_lines(stdout)
        result = last_event(events, "result") or {}
        # The final answer: the assistant's text after its last tool call.
        text: list[str] = []
        for event in events:
            if event.get("type") in ("tool_use", "tool_result"):
                text = []
            elif event.get("type") == "message" and event.get("role") == "assistant":
                text.append(text_of(event.get("content")))
        files = [
            e["parameters"]["file_path"]
            for e in events
            if e.get("type") == "tool_use"
            and e.get("tool_name") in EDIT_TOOLS
            and isinstance(e.get("parameters"), dict)
            and isinstance(e["parameters"].get("file_path"), str)
        ]
        stats = object_at(result, "stats")
        models = object_at(stats, "models")
        used = {
            m: v for m, v in models.items() if isinstance(v, dict) and count_at(v, "total_tokens")
        }
        model = max(used, key=lambda m: count_at(used[m], "total_tokens"), default=None)
        is_error = result.get("status") == "error"
        detail = result.get("error")
        error = (
            text_of(detail.get("message") if isinstance(detail, dict) else detail)
            or "gemini reported an error"
            if is_error
            else None
        )
        cached = count_at(stats, "cached")
        return CliOutput(
            final_text="".join(text).strip(),
            is_error=is_error,
            error=error,
            files_changed=tuple(files),
            usage=Usage(
                input_tokens=max(count_at(stats, "input_tokens") - cached, 0),
                output_tokens=count_at(stats, "output_tokens"),
                cache_read_tokens=cached,
                model=model,
            ),
        )
