"""What every section of t25.yaml shares: strict and frozen models, the roles and risks,
argv lists (never a string for a shell), hosts, paths, and what validation was told (the
config file's directory, whether it is read on this host, the adapters it may name)."""

from __future__ import annotations

import shlex
from pathlib import Path
from typing import Annotated, Any, Literal, get_args

from pydantic import (
    AfterValidator,
    BaseModel,
    BeforeValidator,
    ConfigDict,
    Field,
    ValidationInfo,
)

from core.config.hosts import host_entry
from core.config.locate import CONFIG_FILENAME as CONFIG_FILENAME
from core.config.locate import INIT_HINT as INIT_HINT
from core.config.locate import find_config as find_config
from core.config.locate import task_tree_of as task_tree_of

Role = Literal["spec", "planner", "dev", "qa", "reviewer", "security", "docs"]
ROLES: tuple[str, ...] = get_args(Role)  # in pipeline order
Risk = Literal["low", "medium", "high"]
# What an agent may do in its worktree (core.domain.tools): a profile's `tools:` lists these,
# or says `cli` (the CLI's own defaults); omitted, the role's default set.
ToolClass = Literal["read", "search", "edit", "shell"]
ToolSetting = list[ToolClass] | Literal["cli"] | None


class Section(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True, strict=True)


def config_root(info: ValidationInfo) -> Path:
    """The directory relative paths are resolved against (the config file's)."""
    root = (info.context or {}).get("root")
    return Path(root) if root is not None else Path.cwd()


def on_this_host(info: ValidationInfo) -> bool:
    """Validating a file read here, so its paths and adapters can be checked against
    this host (a Config sent by `t25 serve` or built in memory is not)."""
    return (info.context or {}).get("root") is not None


def known_adapters(info: ValidationInfo) -> tuple[str, ...] | None:
    """The adapter names a profile may use, when the caller said (`load_config(adapters=)`):
    the registry lives in `adapters/`, which core does not import."""
    return (info.context or {}).get("adapters")


def _argv(value: Any) -> Any:
    """Commands are argv lists: T25 never hands a string to a shell."""
    if isinstance(value, str):
        try:
            example = "[" + ", ".join(shlex.split(value)) + "]"
        except ValueError:
            example = "[program, arg, ...]"
        raise ValueError(
            f"expected a list of arguments such as {example}, got a string; "
            "T25 never runs a command through a shell"
        )
    return value


def _host(value: Any) -> Any:
    return host_entry(value) if isinstance(value, str) else value


# A host a confined run may reach (core.config.hosts), written the one way.
HostEntry = Annotated[str, AfterValidator(_host)]

# A path written in YAML is text; strict mode would refuse text for a Path field.
ConfigPath = Annotated[Path, Field(strict=False)]
Argv = Annotated[list[str], BeforeValidator(_argv)]


def refuse_duplicates(noun: str, names: list[str]) -> None:
    seen: set[str] = set()
    for name in names:
        if name in seen:
            raise ValueError(f"two {noun}s are named {name!r}; names must be unique")
        seen.add(name)
