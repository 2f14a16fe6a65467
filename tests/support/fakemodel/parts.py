"""What a request logged by the fake model (`FakeModel.requests`) carries, split the way its
API is: the system prompt, the tool schemas and the messages, in bytes.

Each API names the three differently: Anthropic Messages `system` / `tools` / `messages`;
OpenAI Responses `instructions` (and `developer` or `system` turns of `input`, where Codex
puts its prompt) / `tools` / the rest of `input`; Chat Completions the `system` and
`developer` turns of `messages` / `tools` / the other turns; Gemini `systemInstruction` /
`tools` / `contents`. A part's size is its JSON, compact, in UTF-8 (a string: its text).
`bench/tokens.py` adds them up per stage; the real-CLI tests check the split misses nothing.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any


@dataclass(frozen=True)
class Parts:
    """The bytes of one request's system prompt, tool schemas and messages."""

    system: int = 0
    tools: int = 0
    messages: int = 0

    @property
    def fixed(self) -> int:
        """What every turn resends whatever the conversation: system prompt and tools."""
        return self.system + self.tools

    @property
    def total(self) -> int:
        return self.system + self.tools + self.messages

    def __add__(self, other: Parts) -> Parts:
        return Parts(
            self.system + other.system, self.tools + other.tools, self.messages + other.messages
        )


def size(value: Any) -> int:
    """A field's bytes: a string's UTF-8, anything else as compact JSON; nothing is 0."""
    if value is None:
        return 0
    if isinstance(value, str):
        return len(value.encode())
    return len(json.dumps(value, separators=(",", ":"), ensure_ascii=False).encode())


def parts(request: dict) -> Parts:
    """One logged request, split by its API's own fields."""
    body, path = request.get("body") or {}, request["path"].split("?")[0]
    if path.endswith("/messages"):  # Anthropic Messages
        return Parts(size(body.get("system")), size(body.get("tools")), size(body.get("messages")))
    if path.endswith("/responses"):  # OpenAI Responses
        system, others = _system_turns(body.get("input"))
        return Parts(
            size(body.get("instructions")) + size(system), size(body.get("tools")), size(others)
        )
    if path.endswith("/chat/completions"):  # Chat Completions
        system, others = _system_turns(body.get("messages"))
        return Parts(size(system), size(body.get("tools")), size(others))
    # Gemini generateContent and streamGenerateContent
    return Parts(
        size(body.get("systemInstruction")), size(body.get("tools")), size(body.get("contents"))
    )


def _system_turns(turns: object) -> tuple[list[dict] | None, list[Any] | None]:
    """A message list's system and developer turns, and the rest; None for an empty side."""
    listed = turns if isinstance(turns, list) else []
    system = [t for t in listed if isinstance(t, dict) and t.get("role") in ("system", "developer")]
    others = [t for t in listed if not (isinstance(t, dict) and t in system)]
    return system or None, others or None
