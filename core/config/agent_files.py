"""The files in a project's tree that the agent CLIs T25 ships read: their settings, hooks,
MCP servers, instructions, ignore files and `.env`. A change to one steers every later run
of that CLI, so each is a default protected path (`core.config.schema.DEFAULT_PROTECTED_PATHS`).

Each adapter declares what its CLI reads (`CliAdapterSpec.project_files`, in
`adapters/<cli>.py`), and `adapters.registry` is the only list of the CLIs. This tuple is
their union, in the registry's order, written out as data: the core imports no adapter, and
a command that only reads the configuration (`t25 task list`) imports none either
(tests/e2e/cli/test_startup.py). tests/unit/adapters/test_project_files.py fails, naming
the tuple it expects, until it is exactly that union; a new CLI's files are added here with its adapter.
"""

from __future__ import annotations

AGENT_CLI_FILES: tuple[str, ...] = (
    ".claude/**",
    ".mcp.json",
    "CLAUDE.md",
    "CLAUDE.local.md",
    ".codex/**",
    "AGENTS.md",
    "AGENTS.override.md",
    ".gemini/**",
    "GEMINI.md",
    ".geminiignore",
    ".env",
    "opencode.json",
    "opencode.jsonc",
    ".opencode/**",
    ".aider.conf.yml",
    ".aiderignore",
    ".aider.model.settings.yml",
    ".aider.model.metadata.json",
)
