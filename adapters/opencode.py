"""opencode (`opencode run --format json`): one JSON event a line, tokens and cost per step."""

from __future__ import annotations

from adapters.base import Capabilities, CliAdapterSpec, CliOutput, PromptArg, inline_prompt
from adapters.parsing import count_at, json_lines, number, object_at, text_of
from adapters.process import NETWORK_ENV
from core.domain.agent import AgentRequest
from core.domain.models import Usage

EDIT_TOOLS = {"write", "edit", "patch"}


class OpencodeSpec(CliAdapterSpec):
    name = "opencode"
    binary = "opencode"
    min_version, below_version, tested_version = "1.0.0", "1.19", "1.18.33"
    login_env = (
        *NETWORK_ENV,
        "OPENCODE_CONFIG",
        "OPENCODE_CONFIG_CONTENT",
        "ANTHROPIC_API_KEY",
        "OPENAI_API_KEY",
        "GEMINI_API_KEY",
        "OPENROUTER_API_KEY",
    )
    owned_flags = ("--format",)
    capabilities = Capabilities(
        structured_output="--format json",
        usage=True,
        cost=True,
        resume="--session ID / --continue",
        sandbox_flags="none (permissions from its config)",
    )

    def build_argv(self, request: AgentRequest, prompt: PromptArg) -> list[str]:
        argv = ["run", "--format", "json"]
        if request.model:  # provider/model
            argv += ["-m", request.model]
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

    def config_problems(self, profile_model: str | None, args: list[str]) -> list[str]:
        problems = super().config_problems(profile_model, args)
        if profile_model and "/" not in profile_model:
            problems.append(f"model {profile_model!r}: opencode wants provider/model")
        return problems

    def parse(self, stdout: str) -> CliOutput:
        events = json_lines(stdout)
        parts = [(e.get("type"), e["part"]) for e in events if isinstance(e.get("part"), dict)]
        text: list[str] = []
        files: list[str] = []
        usage = {"input": 0, "output": 0, "read": 0, "write": 0}
        cost = 0.0
        for kind, part in parts:
            if kind == "tool_use":
                text = []
                given = object_at(object_at(part, "state"), "input")
                if part.get("tool") in EDIT_TOOLS and isinstance(given.get("filePath"), str):
                    files.append(given["filePath"])
            elif kind == "text":
                text.append(text_of(part.get("text")))
            elif kind == "step_finish":
                tokens = object_at(part, "tokens")
                cache = object_at(tokens, "cache")
                usage["input"] += count_at(tokens, "input")
                usage["output"] += count_at(tokens, "output")
                usage["read"] += count_at(cache, "read")
                usage["write"] += count_at(cache, "write")
                cost += number(part.get("cost")) or 0.0
        errors = [e["error"] for e in events if e.get("type") == "error"]
        error = None
        if errors:
            last = errors[-1] if isinstance(errors[-1], dict) else {}
            message = object_at(last, "data").get("message")
            error = text_of(message) or text_of(last.get("name")) or "opencode error"
        return CliOutput(
            final_text="\n".join(t for t in text if t).strip(),
            is_error=bool(errors),
            error=error,
            files_changed=tuple(files),
            cost_usd=cost,
            usage=Usage(
                input_tokens=usage["input"],
                output_tokens=usage["output"],
                cache_read_tokens=usage["read"],
                cache_write_tokens=usage["write"],
            ),
        )
