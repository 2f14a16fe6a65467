"""The short base prompt a CLI gets in place of its own whenever T25 sets a run's tools.

Codex and Gemini CLI open every request with their own base prompt, about 22 KB each, written
for a person at a terminal: collaboration, personality, planning, formatting for a chat. A
stage's run has nobody at the terminal, its prompt from T25 carries the task and the answer's
shape, and its tools' schemas describe themselves. So it gets a few hundred bytes instead,
one file per kind of tool set (each role's default set is one of them):

    read   the reading roles (spec, planner, QA, reviewer, security): read and search only
    edit   docs: also edits files, runs no command
    shell  dev: also edits files and runs commands

The files ship with T25, beside this module, and each CLI reads its file by path: where T25
is installed, never from a worktree, so no agent's edit reaches a later run (inside the
sandbox they are read-only, as the rest of the system is).
"""

from __future__ import annotations

from pathlib import Path

from core.domain.tools import SHELL, read_only

BASE_PROMPTS = Path(__file__).with_name("base_prompts")


def base_prompt_file(tools: frozenset[str]) -> Path:
    """The base prompt for a run with the tool classes `tools` (core.domain.tools)."""
    kind = "read" if read_only(tools) else "shell" if SHELL in tools else "edit"
    return BASE_PROMPTS / f"{kind}.md"
