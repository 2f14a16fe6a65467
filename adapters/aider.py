"""aider (`aider --message`): plain text only, and exit 0 even when the provider refused.

Everything is read from its text: the answer, "Tokens: N sent, M received. Cost: $X",
"Applied edit to FILE", and `litellm.*Error` lines, which are its only error reports. A
figure that is not one ("1.2.3k", hundreds of digits) counts as none.
"""

from __future__ import annotations

import itertools
import math
import os
import re
from collections.abc import Mapping, Sequence
from typing import ClassVar

from adapters.base import Capabilities, CliAdapterSpec, CliOutput
from adapters.parsing import count, summed
from adapters.process import NETWORK_ENV
from adapters.prompt_files import PromptArg
from adapters.request_size import FixedPart
from core.domain.agent import AgentRequest
from core.domain.models import Usage
from core.domain.tools import EDIT

_TOKENS = re.compile(
    r"^Tokens: (?P<sent>[\d.,]+k?) sent(?:, (?P<cw>[\d.,]+k?) cache write)?"
    r"(?:, (?P<cr>[\d.,]+k?) cache hit)?, (?P<recv>[\d.,]+k?) received\."
    r"(?: Cost: \$(?P<cost>[\d.]+) message)?",
    re.MULTILINE,
)
_APPLIED = re.compile(r"^Applied edit to (?P<file>.+)$", re.MULTILINE)
_MODEL = re.compile(r"^Model: (?P<model>\S+)", re.MULTILINE)
_ERROR = re.compile(r"^litellm\.\w+(?:Error|Exception)\b.*$", re.MULTILINE)
_NOISE = (
    "Warning for",
    "defaults.",
    "You can skip this check",
    "Aider v",
    "Model:",
    "Git repo:",
    "Repo-map:",
    "Added ",
    "Analytics",
    "Detected dumb",
    "Update git",
    "Creating empty file",
    "Tokens:",
    "Applied edit",
    "Commit ",
    "HTTPSConnectionPool",
    "Retrying in",
    "The API provider",
    "Warning",
    "Main model:",
    "Weak model:",
    "https://aider.chat",
)


def _exchanges(stdout: str, model: str | None) -> tuple[tuple[Usage, ...], float]:
    """Each exchange's tokens (aider prints one report line per model reply, rounded to
    a tenth of a thousand above 1k) and the dollars spent over all of them."""
    reports = list(_TOKENS.finditer(stdout))
    requests = tuple(
        Usage(input_tokens=_count(m["sent"]), output_tokens=_count(m["recv"]), model=model)
        for m in reports
    )
    dollars = sum((_float(m["cost"] or "0") for m in reports), 0.0)
    return requests, dollars if math.isfinite(dollars) else 0.0


def _model(stdout: str) -> str | None:
    found = _MODEL.search(stdout)
    return found["model"] if found else None


def _answer(stdout: str) -> str:
    """What aider said: its output without its banners, progress and error lines."""
    lines = stdout.splitlines()
    kept = [ln for ln in lines if ln.strip() and not ln.startswith(_NOISE) and not _ERROR.match(ln)]
    return "\n".join(kept).strip()


def _count(text: str | None) -> int:
    """A token figure ("1,234", "12.5k") as a count (`adapters.parsing.count`); 0 for none."""
    scale = 1000 if text and text.endswith("k") else 1
    figure = _float((text or "").rstrip("k").replace(",", "")) * scale
    return count(int(figure)) if math.isfinite(figure) else 0


def _float(text: str) -> float:
    """A finite number, else 0."""
    try:
        figure = float(text)
    except ValueError:
        return 0.0
    return figure if math.isfinite(figure) else 0.0


# What each request resends (adapters.request_size), measured on 0.86.2 with `bench/tokens.py
# --clis aider --no-resume`: it has no tools, and an editing role keeps its whole prompt.
FIXED_PARTS = {"openai/fake-model": FixedPart(t25=1_300, defaults=1_300)}


class AiderSpec(CliAdapterSpec):
    name = "aider"
    binary = "aider"
    fixed_parts = FIXED_PARTS
    # Its token and cost lines come after every exchange and `parse` sums them all: it reads
    # up to the log's default bound of stdout, head and tail, rather than the last lines only.
    parse_limit = 64 * 2**20
    min_version, below_version, tested_version = "0.80.0", "0.87", "0.86.2"
    login_files = (".aider/oauth-keys.env",)
    # What it reads from a project's tree (the git root, or its working directory): its
    # config, its `.env`, its ignore file, and its model settings and metadata.
    project_files = (
        ".aider.conf.yml",
        ".env",
        ".aiderignore",
        ".aider.model.settings.yml",
        ".aider.model.metadata.json",
    )
    login_env = (
        *NETWORK_ENV,
        "ANTHROPIC_API_KEY",
        "OPENAI_API_KEY",
        "OPENAI_API_BASE",
        "GEMINI_API_KEY",
        "OPENROUTER_API_KEY",
        "DEEPSEEK_API_KEY",
    )
    base_url_env = ("OPENAI_API_BASE",)
    vendor_hosts = (  # litellm's providers for the keys it reads
        "api.openai.com",
        "api.anthropic.com",
        "generativelanguage.googleapis.com",
        "openrouter.ai",
        "api.deepseek.com",
    )
    owned_flags = ("--message", "-m", "--message-file", "--pretty", "--stream")
    capabilities = Capabilities(
        structured_output="no (text)",
        usage=True,
        cost=True,
        # --restore-chat-history reads the worktree's .aider.chat.history.md, not a session
        # T25 can name: T25 does not pass it.
        resume="no (--restore-chat-history is by worktree, not by session)",
        sandbox_flags="--yes-always",
        # aider always reads .aider.conf.yml and .env from its working directory (and the git
        # root, with git); `--config` and `--env-file` only add one. The command line outranks
        # both, so T25 pins there the settings that would run a program and the OpenAI
        # endpoint. Another provider's endpoint, `load:` or model settings planted there still
        # apply.
        project_config_off="no way; lint, test, shell off, endpoint pinned",
        # No tool calls: aider edits by the edit blocks of its replies, and runs no command
        # under --yes-always (a shell command needs an explicit yes).
        tools="no tools; read-only roles: --chat-mode ask --dry-run",
    )

    # A private HOME gets a price cache, so aider does not fetch litellm's list from GitHub.
    home_files: ClassVar[dict[str, str]] = {
        ".aider/caches/model_prices_and_context_window.json": '{"t25": {}}'
    }

    def build_argv(self, request: AgentRequest, prompt: PromptArg) -> list[str]:
        # No commits, no .gitignore edits, no history files or repo-map cache in the worktree:
        # T25 commits the change, and whatever aider leaves there would be committed with it.
        # No git at all: aider writes the repository's config when it lacks a user name,
        # and inside the sandbox the shared `.git` is read-only.
        argv = [
            "--no-git",
            "--yes-always",
            "--no-auto-commits",
            "--no-dirty-commits",
            "--no-pretty",
            "--no-stream",
            "--no-check-update",
            "--no-show-release-notes",
            "--analytics-disable",
            "--no-gitignore",
            "--no-show-model-warnings",
            "--chat-history-file",
            "/dev/null",
            "--input-history-file",
            "/dev/null",
            "--map-tokens",
            "0",
        ]
        if request.model:
            argv += ["--model", request.model]
        argv += [*self.later_args(request), *self.tool_args(request.tools)]
        message = (
            ["--message-file", str(prompt.path)]
            if prompt.path
            else [f"--message={prompt.text or ''}"]
        )  # `=`: a prompt with dashes stays a value
        return [*argv, *request.args, *message]

    def tool_args(self, tools: frozenset[str] | None) -> list[str]:
        if tools is None:
            return []
        # Its prompt's instructions to suggest shell commands: --yes-always never runs them.
        args = ["--no-suggest-shell-commands"]
        if EDIT not in tools:
            # Ask mode: a prompt without edit-format instructions, and no edit applied; a dry
            # run besides, so that no reply of the model's writes a file whatever its format.
            args += ["--chat-mode", "ask", "--dry-run"]
        return args

    def isolated_args(self, request: AgentRequest) -> list[str]:
        pinned = ["--no-auto-lint", "--no-auto-test", "--no-suggest-shell-commands"]
        # A planted .env is loaded over the environment: the operator's endpoint is pinned
        # where it cannot be, so the key is not sent elsewhere.
        if base := os.environ.get("OPENAI_API_BASE"):
            pinned.append(f"--openai-api-base={base}")
        return pinned

    def base_urls(self, env: Mapping[str, str], args: Sequence[str]) -> list[str]:
        urls = super().base_urls(env, args)
        for arg, value in itertools.pairwise([*args, ""]):
            if arg.startswith("--openai-api-base="):
                urls.append(arg.partition("=")[2])
            elif arg == "--openai-api-base":
                urls.append(value)
        return urls

    def extra_env(self, request: AgentRequest) -> dict[str, str]:
        # litellm's bundled price list instead of fetching one from GitHub at every start.
        return {
            "LITELLM_LOCAL_MODEL_COST_MAP": "True",
            "AIDER_ANALYTICS": "false",
            "AIDER_CHECK_UPDATE": "false",
        }

    def parse(self, stdout: str) -> CliOutput:
        model = _model(stdout)
        requests, cost = _exchanges(stdout, model)
        spent = summed(requests)
        errors = [m.group(0).strip() for m in _ERROR.finditer(stdout)]
        failed = (
            bool(errors) and not spent.input_tokens
        )  # errors, and no token spent: no model answered
        return CliOutput(
            final_text="" if failed else _answer(stdout),
            is_error=failed,
            error=errors[-1] if errors else None,
            files_changed=tuple(
                dict.fromkeys(m["file"].strip() for m in _APPLIED.finditer(stdout))
            ),
            usage=spent.model_copy(update={"model": model}),
            cost_usd=cost or None,
            requests=requests,
        )
