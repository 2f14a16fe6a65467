"""The adapter spec for `t25-scripted-agent`, T25's own model-free agent CLI.

It is also the proof that a spec stays small: everything but these few lines is shared.
"""

from __future__ import annotations

import shutil
import sys
from collections.abc import Iterator
from pathlib import Path

from adapters.base import Capabilities, CliAdapterSpec, CliOutput, QuotaSignal
from adapters.entries import Entry, EventShapes, Kind, call, message_entry
from adapters.parsing import (
    JsonObject,
    anthropic_usage,
    json_lines,
    last_event,
    reset_time,
    text_of,
)
from adapters.prompt_files import PromptArg
from core.domain.agent import AgentRequest

QUOTA_MARKERS = ("hit your session limit", "hit your usage limit")


def _render(e: JsonObject) -> Iterator[Entry]:
    """Its own lines: a message as plain `text`, a tool call as its name and arguments. Its
    system and result lines are Claude Code's shape, read by that CLI's renderer."""
    if e.get("type") == "assistant" and "text" in e and "message" not in e:
        yield message_entry(text_of(e.get("text")))
    elif e.get("type") == "tool_use" and "name" in e and "tool_name" not in e:
        args = {k: v for k, v in e.items() if k not in ("type", "name")}
        yield Entry(Kind.CALL, call(text_of(e.get("name")), args))


class ScriptedSpec(CliAdapterSpec):
    """Its output imitates Claude Code's stream-json: events, then one `result` line."""

    name = "scripted"
    binary = "t25-scripted-agent"
    capabilities = Capabilities(resume="--resume SESSION_ID", project_config_off="reads none")
    needs_login = False
    transcript = EventShapes(_render, known=frozenset({"assistant", "tool_use"}))

    def locate(self) -> str | None:
        # A venv's bin directory holds the script but need not be on PATH.
        beside = Path(sys.executable).with_name(self.binary)
        return shutil.which(self.binary) or (str(beside) if beside.is_file() else None)

    def build_argv(self, request: AgentRequest, prompt: PromptArg) -> list[str]:
        argv = ["--prompt-file", str(prompt.path)] if prompt.path else ["-p", prompt.text or ""]
        if request.model:
            argv += ["--model", request.model]
        if request.resume_session:
            argv += ["--resume", request.resume_session]
        return [*argv, *request.args]

    def parse(self, stdout: str) -> CliOutput:
        events = json_lines(stdout)
        result = last_event(events, "result") or {}
        text = text_of(result.get("result"))
        is_error = result.get("is_error") is True
        files = [
            e["path"]
            for e in events
            if e.get("type") == "tool_use"
            and e.get("name") == "write"
            and isinstance(e.get("path"), str)
        ]
        usage = anthropic_usage(result.get("usage"), text_of(result.get("model")) or None)
        return CliOutput(
            final_text=text,
            is_error=is_error,
            error=text if is_error else None,
            usage=usage,
            files_changed=tuple(dict.fromkeys(files)),
            requests=(usage,) if "usage" in result else (),  # its answer is its one request
            session_id=text_of(result.get("session_id")) or None,
        )

    def detect_quota(self, output: CliOutput, stderr: str) -> QuotaSignal | None:
        for text in (output.error or "", *stderr.splitlines()):
            if any(marker in text.lower() for marker in QUOTA_MARKERS):
                return QuotaSignal(text.strip(), reset_time(text))
        return None
