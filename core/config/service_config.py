"""t25.yaml's sections about how T25 itself runs: cost rates, the sandbox, worktrees, the
store, serve, the audit log and the cockpit."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Annotated, Any, Literal, Protocol

from pydantic import (
    AfterValidator,
    Field,
    NonNegativeFloat,
    ValidationInfo,
    field_validator,
)

from core.config.caches import DEFAULT_CACHES, cache_entry_problem
from core.config.config_section import (
    ConfigPath,
    HostEntry,
    Role,
    Section,
    config_root,
)
from core.config.locate import CONFIG_FILENAME as CONFIG_FILENAME
from core.config.locate import INIT_HINT as INIT_HINT
from core.config.locate import find_config as find_config
from core.config.locate import task_tree_of as task_tree_of
from core.config.source import (
    show,
)


class ProfileSandbox(Protocol):
    """A profile as far as its sandbox goes (core.config.schema.AgentProfile)."""

    @property
    def sandbox(self) -> Literal["none", "bwrap", "docker"] | None: ...


class Rate(Section):
    """USD per million tokens for one model; cost is an estimate, not a bill."""

    input: NonNegativeFloat
    output: NonNegativeFloat
    cache_read: NonNegativeFloat = 0.0
    cache_write: NonNegativeFloat = 0.0


class CostConfig(Section):
    rates: dict[str, Rate] = {}

    def rate_for(self, model: str | None) -> Rate | None:
        """The rate for `model`: an exact name, else the longest name it starts with
        (`claude-sonnet-4-5` prices `claude-sonnet-4-5-20250929`)."""
        if not model:
            return None
        if model in self.rates:
            return self.rates[model]
        prefixes = [name for name in self.rates if model.startswith(name)]
        return self.rates[max(prefixes, key=len)] if prefixes else None


def sandbox_shorthand(value: Any) -> Any:
    return {"mode": value} if isinstance(value, str) else value


class RoleSandbox(Section):
    """What one role's runs may reach beyond the project's list (`sandbox.by_role`)."""

    allow_hosts: list[HostEntry] = []


class SandboxConfig(Section):
    """How every agent run and QA check is confined (adapters.sandbox).

    mode - auto: bubblewrap where it can run, else unconfined with a warning at every start;
    required: bubblewrap or no run at all; none: unconfined. `sandbox: required` is short
    for `sandbox: {mode: required}`.

    network - allowlist: a network of the run's own whose only way out is T25's proxy, which
    lets through the CLI's model endpoints and `allow_hosts` and records every connection;
    none: no network at all; shared: the host's network, its loopback services included."""

    mode: Literal["auto", "required", "none"] = "auto"
    network: Literal["allowlist", "shared", "none"] = "allowlist"
    # Hosts every agent run may reach beyond its CLI's model endpoints (core.config.hosts).
    allow_hosts: list[HostEntry] = []
    by_role: dict[Role, RoleSandbox] = {}  # and one role's runs besides
    # Given back read-only inside the hidden homes, beside the usual toolchain locations.
    read_paths: list[ConfigPath] = []
    # Where an agent run sees the task's tree: `checkout` - at the main checkout's own
    # path, with its virtual environments, so the tests an agent runs import the change
    # (bubblewrap only); `worktree` - at the worktree's path.
    tree_at: Literal["checkout", "worktree"] = "checkout"

    def for_profile(self, profile: ProfileSandbox) -> str:
        """The sandbox one profile's runs get: its own setting, else the project's mode."""
        return profile.sandbox or self.mode

    def hosts_for(self, role: str) -> tuple[str, ...]:
        """What a role's runs may reach beyond their CLI's model endpoints."""
        own = self.by_role.get(role)  # type: ignore[call-overload]
        return tuple(dict.fromkeys([*self.allow_hosts, *(own.allow_hosts if own else [])]))

    @field_validator("read_paths", mode="after")
    @classmethod
    def _absolute(cls, paths: list[Path], info: ValidationInfo) -> list[Path]:
        return [(config_root(info) / path.expanduser()).resolve() for path in paths]


# -- places ------------------------------------------------------------------------------


def _cache_entry(entry: str) -> str:
    problem = cache_entry_problem(entry)
    if problem:
        raise ValueError(problem)
    return entry


class WorktreeConfig(Section):
    root: ConfigPath = Field(default=Path(".factory/worktrees"), validate_default=True)
    # Untracked or ignored paths in these directories do not keep a worktree at cleanup.
    caches: list[Annotated[str, AfterValidator(_cache_entry)]] = Field(
        default_factory=lambda: list(DEFAULT_CACHES)
    )

    @field_validator("root", mode="after")
    @classmethod
    def _absolute(cls, value: Path, info: ValidationInfo) -> Path:
        return (config_root(info) / value.expanduser()).resolve()


class StoreConfig(Section):
    """Where tasks, runs and events are kept. A password belongs in T25_DATABASE_URL."""

    url: str = Field(default="sqlite:///.factory/t25.db", validate_default=True)

    @field_validator("url", mode="after")
    @classmethod
    def _url(cls, value: str, info: ValidationInfo) -> str:
        if not re.match(r"(sqlite:///.|postgres(ql)?://)", value):
            raise ValueError(
                f"expected sqlite:///path/to/file.db or postgresql://host/db, got {show(value)}"
            )
        return absolute_sqlite_url(value, config_root(info))


class ServeConfig(Section):
    bind: str = "127.0.0.1:8725"

    @field_validator("bind")
    @classmethod
    def _bind(cls, value: str) -> str:
        host, _, port = value.rpartition(":")
        if not host or not port.isdigit() or not 0 < int(port) < 65536:
            raise ValueError(f"expected host:port such as 127.0.0.1:8725, got {show(value)}")
        return value

    @property
    def host(self) -> str:
        return self.bind.rpartition(":")[0].strip("[]")

    @property
    def port(self) -> int:
        return int(self.bind.rpartition(":")[2])


class AuditConfig(Section):
    """Where T25's sealing key is (core.control.keyring): the audit log's lines and the
    facts its gates decide on carry a MAC under it. None: `.factory/audit.key` beside this
    file. Serve replicas sharing one store share one key: name the same file on each."""

    key_file: ConfigPath | None = None

    @field_validator("key_file", mode="after")
    @classmethod
    def _absolute(cls, value: Path | None, info: ValidationInfo) -> Path | None:
        return None if value is None else (config_root(info) / value.expanduser()).resolve()


class CockpitConfig(Section):
    """How `t25 tui` behaves (its keys are `keys:`, a section of their own)."""

    # When a human is needed and the terminal is not focused: the bell and a desktop
    # notification (t25_tui.tui.desktop).
    notifications: bool = True


def absolute_sqlite_url(url: str, root: Path) -> str:
    """`sqlite:///.factory/t25.db` -> `sqlite:////<root>/.factory/t25.db`; others unchanged."""
    prefix = "sqlite:///"
    rest = url[len(prefix) :]
    if not url.startswith(prefix) or rest.startswith(("/", ":memory:")):
        return url
    return prefix + str((root / Path(rest).expanduser()).resolve())
