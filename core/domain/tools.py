"""What an agent may do in its worktree, as abstract tool classes, and each role's share.

A CLI offers its model a dozen tools or more, and resends their schemas with every request.
A stage needs a few: a spec writer, planner or reviewer reads and searches the tree, the dev
agent also edits it and runs commands, the docs agent edits without a shell. Each adapter
spec maps a set of these classes onto its own CLI's flags (`--tools`, a read-only sandbox, a
policy file); a CLI that cannot narrow its set says so in its capabilities. Giving a role no
write tool is a second fence beside the sandbox, and every tool left out is bytes not sent.

    role_tools("reviewer")             -> frozenset({"read", "search"})
    tools_for("dev", None)             -> the role's default set
    tools_for("dev", ["read"])         -> frozenset({"read"})
    tools_for("dev", "cli")            -> None: the CLI's own defaults, nothing narrowed
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import get_args

from core.config.config_section import ROLES, ToolClass, ToolSetting

READ: ToolClass = "read"  # read a file
SEARCH: ToolClass = "search"  # find files by name, search their content
EDIT: ToolClass = "edit"  # write a new file, edit an existing one
SHELL: ToolClass = "shell"  # run a command
TOOL_CLASSES: tuple[ToolClass, ...] = get_args(ToolClass)

READ_ONLY = frozenset({READ, SEARCH})

# Each role's default set. The reading roles judge what is in the tree and write their
# artifact as their final answer; QA's checks are run by T25 itself, not by its agent.
ROLE_TOOLS: dict[str, frozenset[str]] = {
    "spec": READ_ONLY,
    "planner": READ_ONLY,
    "dev": frozenset({READ, SEARCH, EDIT, SHELL}),
    "qa": READ_ONLY,
    "reviewer": READ_ONLY,
    "security": READ_ONLY,
    "docs": frozenset({READ, SEARCH, EDIT}),
}
assert set(ROLE_TOOLS) == set(ROLES), "every role has a default tool set"


def role_tools(role: str) -> frozenset[str]:
    """The tool classes `role` gets when its profile names none."""
    return ROLE_TOOLS.get(role, READ_ONLY)


def tools_for(role: str, setting: ToolSetting) -> frozenset[str] | None:
    """The tool classes a run of `role` gets under a profile's `tools:` setting: the role's
    default when it says nothing, the classes it lists, or None for `cli` (the CLI's own
    defaults, and none of T25's overhead switches)."""
    if setting == "cli":
        return None
    if setting is None:
        return role_tools(role)
    return frozenset(setting)


def ordered(tools: Iterable[str]) -> list[str]:
    """Tool classes in their canonical order (read, search, edit, shell), for display."""
    given = set(tools)
    return [name for name in TOOL_CLASSES if name in given]


def read_only(tools: frozenset[str] | None) -> bool:
    """Whether a run may change no file: it has neither edit tools nor a shell."""
    return tools is not None and not tools & {EDIT, SHELL}
