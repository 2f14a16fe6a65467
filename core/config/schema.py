"""t25.yaml: what T25 works on, which agent plays each role, and the policy it enforces.

The schema is strict on purpose. Every section forbids unknown keys (a typo must never
be silently ignored), values are not coerced across types (`"25"` is not a number),
and nothing that looks like a credential is accepted (see `core.config.secrets`).
Every mistake becomes a one-line `ConfigError` naming file, line and key (see
`core.config.source`). Relative paths are resolved against the config file's
directory, so a config means the same thing from whichever directory T25 starts.

    load_config(path)            -> Config
    find_config(start, explicit) -> Path of the t25.yaml to use (never a task worktree's)
    default_config_text()        -> the shipped, fully commented t25.yaml.example
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterable, Mapping, Sequence
from importlib import resources
from pathlib import Path
from typing import Annotated, Any, Literal, get_args

from pydantic import (
    BeforeValidator,
    Field,
    NonNegativeInt,
    PositiveFloat,
    PositiveInt,
    PrivateAttr,
    ValidationError,
    ValidationInfo,
    field_validator,
    model_validator,
)

from core.config import held_secrets
from core.config.config_section import (
    ROLES,
    Argv,
    ConfigPath,
    Role,
    Section,
    ToolClass,
    ToolSetting,
    config_root,
    known_adapters,
    on_this_host,
    refuse_duplicates,
)
from core.config.intake_config import IntakeConfig
from core.config.keys import KEYS_HINT, Bindable, Keys, keymap_problems
from core.config.locate import CONFIG_FILENAME as CONFIG_FILENAME
from core.config.locate import INIT_HINT as INIT_HINT
from core.config.locate import display_path
from core.config.locate import find_config as find_config
from core.config.locate import task_tree_of as task_tree_of
from core.config.policy_config import (
    ApprovalPolicy,
    Policies,
    QAConfig,
)
from core.config.pull_request_config import MergeConfig, PullRequestConfig
from core.config.secrets import refuse_credentials
from core.config.service_config import (
    AuditConfig,
    CockpitConfig,
    CostConfig,
    Rate,
    SandboxConfig,
    ServeConfig,
    StoreConfig,
    WorktreeConfig,
    absolute_sqlite_url,
    sandbox_shorthand,
)
from core.config.source import (
    ConfigSource,
    parse_source,
    show,
    unknown_name,
    validation_error,
)
from core.errors import ConfigError

DATABASE_URL_ENV = held_secrets.DATABASE_URL

# -- projects ----------------------------------------------------------------------------

_PROJECT_NAME = re.compile(r"[a-z0-9][a-z0-9_.-]*")
# Not a full git ref check: enough that a branch can never be read as an option or a range.
_BRANCH = re.compile(r"(?!-)(?!.*\.\.)[^\s~^:?*\[\\]+")


class ProjectConfig(Section):
    """A git repository T25 works on, and where its policy differs from the installation's:
    each key set under its `roles`, `limits`, `qa` or `approval` replaces the top-level one
    for this project's tasks (`Config.for_project`)."""

    name: str
    repo: ConfigPath = Field(default=Path("."), validate_default=True)
    default_branch: str | None = None  # None: detected from git when the project is used
    prompts: ConfigPath | None = None  # a directory of prompt-template overrides
    roles: RoleChains | None = None  # a role named here replaces that role's chain
    limits: Limits | None = None  # a limit named here replaces that limit
    qa: QAConfig | None = None  # `checks` here replace the checks
    approval: ApprovalPolicy | None = None
    # `allow_hosts` here replaces the list, and so on for each key set
    sandbox: Annotated[SandboxConfig | None, BeforeValidator(sandbox_shorthand)] = None
    intake: IntakeConfig | None = None  # the tracker its tasks come from (core.control.intake)
    # The forge its pull requests are opened on, and how PR_OPEN waits on them.
    pull_request: PullRequestConfig | None = None

    def overrides(self) -> list[str]:
        """What this project sets in place of the top-level policy, one `section.key value`
        each (`limits.max_diff_lines 5000`, `roles.dev codex, claude`), as t25.yaml says it."""
        out = []
        for section in _PER_PROJECT:
            own = getattr(self, section)
            for key in sorted(own.model_fields_set) if own is not None else ():
                value = getattr(own, key)
                if section == "roles":
                    shown = ", ".join(_profile_name(p) for p in value or []) or "(none)"
                elif section == "qa":
                    shown = ", ".join(check.name for check in value) or "(none)"
                elif isinstance(value, list):
                    shown = ", ".join(map(str, value)) or "(none)"
                else:
                    shown = "(no budget)" if value is None else str(value)
                out.append(f"{section}.{key} {shown}")
        return out

    @field_validator("limits")
    @classmethod
    def _per_project(cls, limits: Limits | None) -> Limits | None:
        if limits is not None and "workers" in limits.model_fields_set:
            raise ValueError(
                "workers is how many runs this T25 process works at once, for every project: "
                "set it in the top-level limits"
            )
        return limits

    @field_validator("name")
    @classmethod
    def _name(cls, value: str) -> str:
        if not _PROJECT_NAME.fullmatch(value):
            raise ValueError(
                "expected lowercase letters, digits, '_', '.' or '-', starting with a "
                f"letter or digit, got {show(value)}"
            )
        return value

    @field_validator("default_branch")
    @classmethod
    def _branch(cls, value: str | None) -> str | None:
        if value is not None and not _BRANCH.fullmatch(value):
            raise ValueError(f"expected a git branch name such as main, got {show(value)}")
        return value

    @field_validator("repo", "prompts", mode="after")
    @classmethod
    def _absolute(cls, value: Path | None, info: ValidationInfo) -> Path | None:
        return None if value is None else (config_root(info) / value.expanduser()).resolve()

    @field_validator("repo", mode="after")
    @classmethod
    def _exists(cls, value: Path, info: ValidationInfo) -> Path:
        # Checked only for a file read on this host (`load_config`): a Config that a
        # remote cockpit receives from `t25 serve` names the serve host's directories.
        if on_this_host(info) and not value.is_dir():
            raise ValueError(
                f"{value} does not exist" if not value.exists() else f"{value} is not a directory"
            )
        return value


# -- roles -------------------------------------------------------------------------------


_ENV_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")
_NEVER_PASSED = frozenset(held_secrets.NAMES)


class AgentProfile(Section):
    """One agent CLI to try for a role: which adapter, which model, how long it may run."""

    adapter: str = Field(min_length=1)
    model: str | None = None
    args: Argv = []
    timeout_s: PositiveInt | None = None  # None: limits.run_timeout_s
    # Names (never values) of variables the CLI itself needs, e.g. its own login's
    # ANTHROPIC_API_KEY; passed through only when set. T25's own secrets never are.
    env_passthrough: list[str] = []
    private_home: bool = False  # a fresh HOME and CLI config dir per run
    # None: the project's `sandbox.mode`. bwrap: bubblewrap or refuse; none: unconfined.
    sandbox: Literal["none", "bwrap", "docker"] | None = None
    sandbox_image: str | None = None  # required with sandbox: docker
    # A QA or review send-back continues the last dev run's CLI session instead of starting
    # cold, where the CLI resumes headless (its adapter's `resume` capability).
    resume: bool = False
    tools: ToolSetting = None  # None: the role's default set (core.domain.tools)

    @field_validator("adapter")
    @classmethod
    def _adapter(cls, name: str, info: ValidationInfo) -> str:
        known = known_adapters(info)
        if known is not None and name not in known:
            raise ValueError(unknown_name("adapter", name, sorted(known)))
        return name

    @field_validator("tools", mode="before")
    @classmethod
    def _tools(cls, value: Any) -> Any:
        known = list(get_args(ToolClass))
        if isinstance(value, str) and value != "cli":
            raise ValueError(
                f"expected a list of tool classes such as [read, search], or cli, got {show(value)}"
            )
        for name in value if isinstance(value, list) else ():
            if name not in get_args(ToolClass):
                raise ValueError(
                    unknown_name("tool class", str(name), known)
                    + "; `tools: cli` keeps the CLI's own tools"
                )
        return value

    @field_validator("env_passthrough")
    @classmethod
    def _env_names(cls, names: list[str]) -> list[str]:
        for name in names:
            if not _ENV_NAME.fullmatch(name):
                raise ValueError(
                    f"expected environment variable names such as "
                    f"ANTHROPIC_API_KEY, got {show(name)}"
                )
            if name in _NEVER_PASSED:
                raise ValueError(f"{name} is T25's own secret and never reaches an agent")
        return names

    @model_validator(mode="after")
    def _image(self) -> AgentProfile:
        if self.sandbox == "docker" and not self.sandbox_image:
            raise ValueError("sandbox: docker needs sandbox_image (the image to run the CLI in)")
        if self.resume and (self.private_home or self.sandbox != "none"):
            raise ValueError(
                "resume: true needs the CLI's own HOME, where it keeps its sessions: a private "
                "HOME (private_home: true, or any sandbox) is new for every run and its "
                "sessions go with it; set private_home: false and sandbox: none, or resume: false"
            )
        return self


def _chain(value: Any) -> Any:
    if isinstance(value, dict):
        raise ValueError(
            "expected a list of agent profiles (write `- adapter: ...`), got a single mapping"
        )
    return value


# An ordered fallback chain: a missing binary or an exhausted quota moves to the next.
Chain = Annotated[list[AgentProfile], Field(min_length=1), BeforeValidator(_chain)]


def _claude() -> list[AgentProfile]:
    return [AgentProfile(adapter="claude")]


class RoleChains(Section):
    """Each role's fallback chain of agent profiles. `security` runs only when present."""

    spec: Chain = Field(default_factory=_claude)
    planner: Chain = Field(default_factory=_claude)
    dev: Chain = Field(default_factory=_claude)
    qa: Chain = Field(default_factory=_claude)
    reviewer: Chain = Field(default_factory=_claude)
    security: Chain | None = None
    docs: Chain = Field(default_factory=_claude)

    def chain(self, role: str) -> list[AgentProfile] | None:
        """The chain for `role`, or None for a role that is not configured (security)."""
        if role not in ROLES:
            raise ConfigError(f"unknown role {role!r} (known: {', '.join(ROLES)})")
        chain: list[AgentProfile] | None = getattr(self, role)
        return chain


# -- policy ------------------------------------------------------------------------------


DEFAULT_MAX_OUTPUT_EVENT_BYTES = 8 * 2**20
MAX_LOG_BYTES = 64 * 2**20


class RoleBudget(Section):
    """What one role's runs of a task may spend (`limits.by_role`); None: no budget."""

    max_cost_usd: PositiveFloat | None = None
    max_tokens: PositiveInt | None = None


class Limits(Section):
    """Bounds T25 enforces, whatever an agent says."""

    max_files_changed: PositiveInt = 25
    max_diff_lines: PositiveInt = 1000
    max_review_loops: NonNegativeInt = 2
    max_qa_loops: NonNegativeInt = 2
    # Times a pull request's failing CI sends the task back before it asks the operator.
    max_ci_loops: NonNegativeInt = 2
    # Dependencies one task may add across its manifests; None: no budget.
    max_new_dependencies: NonNegativeInt | None = None
    # What one task may spend, in estimated USD (cost.rates) and in tokens; None: no budget.
    # Reached, the task waits for a human before its next run (an answer can raise it).
    max_cost_usd: PositiveFloat | None = None
    max_tokens: PositiveInt | None = None
    # The same, for one role's runs of a task (`by_role: {reviewer: {max_cost_usd: 1}}`).
    by_role: dict[Role, RoleBudget] = {}
    run_timeout_s: PositiveInt = 1800
    workers: PositiveInt = 2
    # What one run (an agent, a QA check) may use of the machine (adapters.caps): its memory
    # (MiB), its processes at once, and the CPU seconds of each of its processes. The
    # defaults leave a 2-core, 24 GiB machine room for `workers` runs and T25 itself.
    run_memory_mib: Annotated[int, Field(ge=64)] = 4096
    run_processes: Annotated[int, Field(ge=16)] = 512
    run_cpu_s: PositiveInt = 3600
    # The bytes of one file a change may add or grow to (a binary counts no lines).
    max_file_bytes: PositiveInt = 10 * 2**20
    # An agent's output streamed as events, per run; past it, one truncation marker.
    max_output_event_bytes: PositiveInt = DEFAULT_MAX_OUTPUT_EVENT_BYTES
    # An agent's output kept byte-exact in its log artifact; past it, the marker. At most
    # 64 MiB. Never held whole: spooled to a file, uploaded to serve and stored in chunks.
    max_log_bytes: Annotated[int, Field(ge=4096, le=MAX_LOG_BYTES)] = MAX_LOG_BYTES


# -- the whole file ----------------------------------------------------------------------


class Config(Section):
    """A validated t25.yaml. Paths in it are absolute; `path` is the file it came from."""

    projects: Annotated[list[ProjectConfig], Field(min_length=1)]
    roles: RoleChains = RoleChains()
    limits: Limits = Limits()
    approval: ApprovalPolicy = ApprovalPolicy()
    policies: Policies = Field(default_factory=Policies)
    qa: QAConfig = QAConfig()
    cost: CostConfig = CostConfig()
    sandbox: Annotated[SandboxConfig, BeforeValidator(sandbox_shorthand)] = SandboxConfig()
    # Validated from {} so their default relative paths resolve against the file's directory.
    worktrees: WorktreeConfig = Field(default_factory=dict, validate_default=True)
    store: StoreConfig = Field(default_factory=dict, validate_default=True)
    serve: ServeConfig = ServeConfig()
    audit: AuditConfig = AuditConfig()
    cockpit: CockpitConfig = CockpitConfig()
    keys: dict[str, Keys] = {}  # the cockpit's commands on other keys (core.config.keys)
    merge: MergeConfig = MergeConfig()

    # Not a key of the file: set by load_config. A Config built in memory acts as if
    # it were read from ./t25.yaml, matching how its relative paths were resolved.
    _path: Path = PrivateAttr(default_factory=lambda: Path.cwd() / CONFIG_FILENAME)

    @field_validator("projects")
    @classmethod
    def _unique(cls, projects: list[ProjectConfig]) -> list[ProjectConfig]:
        refuse_duplicates("project", [project.name for project in projects])
        return projects

    @model_validator(mode="after")
    def _forge_merges_where_there_is_one(self) -> Config:
        if self.merge.via == "forge":
            lacking = [p.name for p in self.projects if p.pull_request is None]
            if lacking:
                raise ValueError(
                    "merge.via forge merges pull requests through the forge: give "
                    f"{', '.join(lacking)} a `pull_request:` (its forge and repository), "
                    "or merge via git"
                )
        return self

    @property
    def path(self) -> Path:
        return self._path

    @property
    def root(self) -> Path:
        return self._path.parent

    @property
    def store_url(self) -> str:
        """T25_DATABASE_URL when set (the only place a database password may live),
        else store.url."""
        from_env = (held_secrets.get(DATABASE_URL_ENV) or "").strip()
        return absolute_sqlite_url(from_env, Path.cwd()) if from_env else self.store.url

    def private_paths(self) -> tuple[Path, ...]:
        """What no agent or QA check may see: T25's state - the store, the audit log, the
        ownership records and every task's worktree."""
        paths = {self.root / ".factory", self.worktrees.root}
        paths |= {project.repo / ".factory" for project in self.projects}
        if self.store_url.startswith("sqlite:///"):
            db = Path(self.store_url.removeprefix("sqlite:///"))
            paths |= {db, db.with_name(db.name + "-wal"), db.with_name(db.name + "-shm")}
        return tuple(sorted(paths))

    def project(self, name: str | None = None) -> ProjectConfig:
        """The named project; with no name, the first (usually the only) one."""
        if name is None:
            return self.projects[0]
        for project in self.projects:
            if project.name == name:
                return project
        known = ", ".join(project.name for project in self.projects)
        raise ConfigError(
            f"unknown project {name!r} (known: {known})",
            hint=f"projects are listed under `projects:` in {self.path}",
        )

    def for_project(self, name: str | None) -> Config:
        """The policy in force for one project's tasks: this configuration with the keys its
        `projects[]` entry sets under `roles`, `limits`, `qa` and `approval` in place of the
        top-level ones. An unknown project is a ConfigError."""
        project = self.project(name)
        overrides = {
            section: _overridden(getattr(self, section), own)
            for section in _PER_PROJECT
            if (own := getattr(project, section)) is not None
        }
        return self.model_copy(update=overrides) if overrides else self

    def profiles(self) -> list[AgentProfile]:
        """Every profile of every role's chain, the top level's and each project's own."""
        configs = [self, *(self.for_project(p.name) for p in self.projects if p.roles)]
        return [p for c in configs for role in ROLES for p in c.roles.chain(role) or []]

    def rate_for(self, model: str | None) -> Rate | None:
        return self.cost.rate_for(model)

    def timeout_for(self, profile: AgentProfile) -> int:
        return profile.timeout_s or self.limits.run_timeout_s


_PER_PROJECT = ("roles", "limits", "qa", "approval", "sandbox")  # sections a project may override


def _profile_name(profile: AgentProfile) -> str:
    return profile.adapter + (f" ({profile.model})" if profile.model else "")


def _overridden(section: Section, own: Section) -> Section:
    """`section` with the keys `own` sets (as written in t25.yaml) taking their place."""
    return section.model_copy(update={key: getattr(own, key) for key in own.model_fields_set})


# -- loading -----------------------------------------------------------------------------


def load_config(
    path: Path,
    *,
    adapters: Iterable[str] | None = None,
    commands: Callable[[], Mapping[str, Bindable]] | None = None,
) -> Config:
    """Read and validate a t25.yaml; every problem is a one-line ConfigError. With
    `adapters` (the names the caller can run), a profile naming another is refused; with
    `commands` (a source of the cockpit's, called only when the file has `keys:`), so is a
    `keys:` entry the cockpit could not bind."""
    path = Path(path).expanduser().absolute()
    name = display_path(path)
    try:
        text = path.read_text(encoding="utf-8")
    except FileNotFoundError:
        raise ConfigError(f"{name}: no such file", hint=INIT_HINT) from None
    except IsADirectoryError:
        raise ConfigError(
            f"{name}: is a directory, not a config file",
            hint=f"point --config at the {CONFIG_FILENAME} inside it",
        ) from None
    except UnicodeDecodeError:
        raise ConfigError(f"{name}: is not UTF-8 text", hint="save it as UTF-8") from None
    except OSError as exc:
        raise ConfigError(
            f"{name}: cannot be read ({exc.strerror})", hint="check the file's permissions"
        ) from None
    return parse_config(text, path, adapters=adapters, commands=commands)


def parse_config(
    text: str,
    path: Path,
    *,
    adapters: Iterable[str] | None = None,
    commands: Callable[[], Mapping[str, Bindable]] | None = None,
) -> Config:
    """Validate `text` as if it were the file at `path` (relative paths resolve beside it)."""
    path = Path(path).expanduser().absolute()
    source = parse_source(text, display_path(path))
    refuse_credentials(source)
    _require_mapping(source)
    context = {"root": path.parent, "adapters": None if adapters is None else tuple(adapters)}
    try:
        config = Config.model_validate(source.data, context=context)
    except ValidationError as exc:
        raise validation_error(source, exc, Config) from None
    if config.keys and commands is not None:
        _refuse_unbindable_keys(source, config.keys, commands())
    config._path = path
    return config


def _refuse_unbindable_keys(
    source: ConfigSource, keys: Mapping[str, Sequence[str]], commands: Mapping[str, Bindable]
) -> None:
    if wrong := next(keymap_problems(keys, commands), None):
        raise source.error(("keys", wrong[0]), wrong[1], hint=KEYS_HINT)


def _require_mapping(source: ConfigSource) -> None:
    if source.data is None:
        raise ConfigError(
            f"{source.name}:1: the file is empty; expected at least a `projects:` list",
            hint="copy t25.yaml.example, or " + INIT_HINT,
        )
    if not isinstance(source.data, dict):
        raise source.error(
            (), f"expected keys such as `projects:` at the top level, got {show(source.data)}"
        )


def default_config_text() -> str:
    """The shipped t25.yaml.example: every key, commented, with its default."""
    return (
        resources.files("core.config.data").joinpath("t25.yaml.example").read_text(encoding="utf-8")
    )
