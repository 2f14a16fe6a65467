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
import shlex
from collections.abc import Callable, Iterable, Mapping, Sequence
from importlib import resources
from pathlib import Path, PurePosixPath
from typing import Annotated, Any, Literal, get_args

from pydantic import (
    AfterValidator,
    BaseModel,
    BeforeValidator,
    ConfigDict,
    Field,
    NonNegativeFloat,
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
from core.config.agent_files import AGENT_CLI_FILES
from core.config.caches import DEFAULT_CACHES, cache_entry_problem
from core.config.hosts import host_entry
from core.config.keys import KEYS_HINT, Bindable, Keys, keymap_problems
from core.config.locate import CONFIG_FILENAME as CONFIG_FILENAME
from core.config.locate import INIT_HINT as INIT_HINT
from core.config.locate import display_path
from core.config.locate import find_config as find_config
from core.config.locate import task_tree_of as task_tree_of
from core.config.secrets import refuse_credentials
from core.config.source import (
    ConfigSource,
    parse_source,
    show,
    unknown_name,
    validation_error,
)
from core.errors import ConfigError

DATABASE_URL_ENV = held_secrets.DATABASE_URL

Role = Literal["spec", "planner", "dev", "qa", "reviewer", "security", "docs"]
ROLES: tuple[str, ...] = get_args(Role)  # in pipeline order
Risk = Literal["low", "medium", "high"]
# What an agent may do in its worktree (core.domain.tools): a profile's `tools:` lists these,
# or says `cli` (the CLI's own defaults); omitted, the role's default set.
ToolClass = Literal["read", "search", "edit", "shell"]
ToolSetting = list[ToolClass] | Literal["cli"] | None


class _Section(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True, strict=True)


def _root(info: ValidationInfo) -> Path:
    """The directory relative paths are resolved against (the config file's)."""
    root = (info.context or {}).get("root")
    return Path(root) if root is not None else Path.cwd()


def _on_this_host(info: ValidationInfo) -> bool:
    """Validating a file read here, so its paths and adapters can be checked against
    this host (a Config sent by `t25 serve` or built in memory is not)."""
    return (info.context or {}).get("root") is not None


def _known_adapters(info: ValidationInfo) -> tuple[str, ...] | None:
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


# -- projects ----------------------------------------------------------------------------

_PROJECT_NAME = re.compile(r"[a-z0-9][a-z0-9_.-]*")
# Not a full git ref check: enough that a branch can never be read as an option or a range.
_BRANCH = re.compile(r"(?!-)(?!.*\.\.)[^\s~^:?*\[\\]+")


class ProjectConfig(_Section):
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
    sandbox: Annotated[SandboxConfig | None, BeforeValidator(_sandbox_shorthand)] = None

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
        return None if value is None else (_root(info) / value.expanduser()).resolve()

    @field_validator("repo", mode="after")
    @classmethod
    def _exists(cls, value: Path, info: ValidationInfo) -> Path:
        # Checked only for a file read on this host (`load_config`): a Config that a
        # remote cockpit receives from `t25 serve` names the serve host's directories.
        if _on_this_host(info) and not value.is_dir():
            raise ValueError(
                f"{value} does not exist" if not value.exists() else f"{value} is not a directory"
            )
        return value


# -- roles -------------------------------------------------------------------------------


_ENV_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")
_NEVER_PASSED = frozenset(held_secrets.NAMES)


class AgentProfile(_Section):
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
        known = _known_adapters(info)
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


class RoleChains(_Section):
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


class RoleBudget(_Section):
    """What one role's runs of a task may spend (`limits.by_role`); None: no budget."""

    max_cost_usd: PositiveFloat | None = None
    max_tokens: PositiveInt | None = None


class Limits(_Section):
    """Bounds T25 enforces, whatever an agent says."""

    max_files_changed: PositiveInt = 25
    max_diff_lines: PositiveInt = 1000
    max_review_loops: NonNegativeInt = 2
    max_qa_loops: NonNegativeInt = 2
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


class ApprovalPolicy(_Section):
    """Which plan risk levels wait for a human before implementation starts."""

    require_for_risk: list[Risk] = ["high"]

    def requires_approval(self, risk: str) -> bool:
        return risk in self.require_for_risk


# What a change may not touch without an approver naming it at merge: CI, what the agent
# CLIs read from the tree (core.config.agent_files), T25's configuration, git's attributes
# and hooks, the harness that decides what a check runs and how (a conftest.py can skip or
# pass any test), build files, and dependency manifests and lock files.
# gitignore-style: a pattern without a slash matches a file's name at any depth; one with a
# slash is anchored at the repository's root; `**` spans directories.
DEFAULT_PROTECTED_PATHS: tuple[str, ...] = (
    ".github/workflows/**",
    ".github/actions/**",
    ".gitlab-ci.yml",
    ".circleci/**",
    "Jenkinsfile",
    "azure-pipelines.yml",
    ".buildkite/**",
    *AGENT_CLI_FILES,
    "t25.yaml",
    ".gitattributes",
    ".gitmodules",
    ".githooks/**",
    ".husky/**",
    ".pre-commit-config.yaml",
    "lefthook.yml",
    "conftest.py",
    "pytest.ini",
    "tox.ini",
    "noxfile.py",
    "Makefile",
    "makefile",
    "GNUmakefile",
    "justfile",
    "Justfile",
    ".justfile",
    "jest.config.*",
    "vitest.config.*",
    ".mocharc*",
    "CMakeLists.txt",
    "*.cmake",
    "package.json",
    "package-lock.json",
    "npm-shrinkwrap.json",
    "yarn.lock",
    "pnpm-lock.yaml",
    "bun.lockb",
    "pyproject.toml",
    "setup.py",
    "setup.cfg",
    "*requirements*.txt",
    "requirements/**",
    "constraints*.txt",
    "poetry.lock",
    "uv.lock",
    "Pipfile",
    "Pipfile.lock",
    "Cargo.toml",
    "Cargo.lock",
    "go.mod",
    "go.sum",
    "Gemfile",
    "Gemfile.lock",
    "composer.json",
    "composer.lock",
)

_PATTERN = re.compile(r"[^\s\\]+")


# Documentation by kind of file, at any depth: text a reader reads, not code a tool runs (a
# `docs/conf.py` is Python, so `docs/**` is not here).
DEFAULT_DOCS_PATHS: tuple[str, ...] = ("*.md", "*.rst", "*.adoc")

# Where a project keeps its tests: a change that removes a file there (or renames it away)
# is treated as touching a protected path - a deleted test passes every check.
DEFAULT_TEST_PATHS: tuple[str, ...] = (
    "tests",
    "test",
    "testing",
    "__tests__",
    "spec",
    "test_*.py",
    "*_test.py",
    "*_test.go",
    "*.test.*",
    "*.spec.*",
)


class Policies(_Section):
    """What a change may touch unnamed, and who may review it."""

    # Replaces the defaults when set; `extra_protected_paths` adds to whichever list holds.
    protected_paths: list[str] = Field(default_factory=lambda: list(DEFAULT_PROTECTED_PATHS))
    extra_protected_paths: list[str] = []
    # A REVIEW run skips a profile that is the change's author: model (the same adapter
    # running the same model, or one T25 cannot tell apart), adapter (the same CLI), or off.
    # YAML reads `off` (and `false`, `no`) as false: that is `off`, no review is passed over.
    reviewer_differs_from_author: Literal["adapter", "model", "off"] = "model"
    # What the DOCS stage may change and still merge as reviewed; a protected path never
    # counts as documentation. Anything else it changes goes through QA and review.
    docs_paths: list[str] = Field(default_factory=lambda: list(DEFAULT_DOCS_PATHS))
    # Where the project's tests live: removing a file there counts as touching a protected
    # path (named at merge with --allow-path like one).
    test_paths: list[str] = Field(default_factory=lambda: list(DEFAULT_TEST_PATHS))

    @field_validator("reviewer_differs_from_author", mode="before")
    @classmethod
    def _off(cls, value: object) -> object:
        """YAML 1.1 reads an unquoted `off` as false; both mean `off`. `true` says nothing
        about what must differ, so it is refused with the choices."""
        if value is False:
            return "off"
        if value is True:
            raise ValueError("true does not say what must differ: give model, adapter or off")
        return value

    @field_validator("protected_paths", "extra_protected_paths", "docs_paths", "test_paths")
    @classmethod
    def _patterns(cls, patterns: list[str]) -> list[str]:
        for pattern in patterns:
            if not _PATTERN.fullmatch(pattern) or pattern.startswith("!"):
                raise ValueError(
                    "expected path patterns such as .github/workflows/** or package.json "
                    f"(no spaces, backslashes or '!'), got {show(pattern)}"
                )
        return patterns

    @property
    def protected(self) -> tuple[str, ...]:
        """Every protected pattern in force."""
        return (*self.protected_paths, *self.extra_protected_paths)


class QACheck(_Section):
    """A command QA runs in the task's worktree; a required check must pass to merge."""

    name: str = Field(min_length=1)
    run: Annotated[Argv, Field(min_length=1)]
    required: bool = True
    timeout_s: PositiveInt = 900
    # The JUnit XML report the check writes, relative to the tree (pytest's `--junitxml=`
    # in `run` names it too): T25 reads the test figures from it, then removes it.
    junit: str | None = None

    @field_validator("junit")
    @classmethod
    def _inside_the_tree(cls, junit: str | None) -> str | None:
        if junit is None:
            return None
        path = PurePosixPath(junit)
        if not junit.strip() or "\0" in junit or path.is_absolute() or ".." in path.parts:
            raise ValueError(f"junit: {junit!r} must be a path inside the tree, relative to it")
        return junit


class QAConfig(_Section):
    checks: list[QACheck] = []
    # What the checks (QA's and the merge's trial) reach: none, or allowlist with
    # `allow_hosts`, or shared (the host's network); sandboxed runs only.
    network: Literal["none", "allowlist", "shared"] = "none"
    allow_hosts: list[HostEntry] = []
    # Where the checks see the task's tree: `checkout` - at the main checkout's own path,
    # with its virtual environments and node_modules, so an editable install imports the
    # change (bubblewrap only); `worktree` - at the worktree's path.
    tree_at: Literal["checkout", "worktree"] = "checkout"

    @field_validator("checks")
    @classmethod
    def _unique(cls, checks: list[QACheck]) -> list[QACheck]:
        _refuse_duplicates("check", [check.name for check in checks])
        return checks


class Rate(_Section):
    """USD per million tokens for one model; cost is an estimate, not a bill."""

    input: NonNegativeFloat
    output: NonNegativeFloat
    cache_read: NonNegativeFloat = 0.0
    cache_write: NonNegativeFloat = 0.0


class CostConfig(_Section):
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


def _sandbox_shorthand(value: Any) -> Any:
    return {"mode": value} if isinstance(value, str) else value


class RoleSandbox(_Section):
    """What one role's runs may reach beyond the project's list (`sandbox.by_role`)."""

    allow_hosts: list[HostEntry] = []


class SandboxConfig(_Section):
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

    def for_profile(self, profile: AgentProfile) -> str:
        """The sandbox one profile's runs get: its own setting, else the project's mode."""
        return profile.sandbox or self.mode

    def hosts_for(self, role: str) -> tuple[str, ...]:
        """What a role's runs may reach beyond their CLI's model endpoints."""
        own = self.by_role.get(role)  # type: ignore[call-overload]
        return tuple(dict.fromkeys([*self.allow_hosts, *(own.allow_hosts if own else [])]))

    @field_validator("read_paths", mode="after")
    @classmethod
    def _absolute(cls, paths: list[Path], info: ValidationInfo) -> list[Path]:
        return [(_root(info) / path.expanduser()).resolve() for path in paths]


# -- places ------------------------------------------------------------------------------


def _cache_entry(entry: str) -> str:
    problem = cache_entry_problem(entry)
    if problem:
        raise ValueError(problem)
    return entry


class WorktreeConfig(_Section):
    root: ConfigPath = Field(default=Path(".factory/worktrees"), validate_default=True)
    # Untracked or ignored paths in these directories do not keep a worktree at cleanup.
    caches: list[Annotated[str, AfterValidator(_cache_entry)]] = list(DEFAULT_CACHES)

    @field_validator("root", mode="after")
    @classmethod
    def _absolute(cls, value: Path, info: ValidationInfo) -> Path:
        return (_root(info) / value.expanduser()).resolve()


class StoreConfig(_Section):
    """Where tasks, runs and events are kept. A password belongs in T25_DATABASE_URL."""

    url: str = Field(default="sqlite:///.factory/t25.db", validate_default=True)

    @field_validator("url", mode="after")
    @classmethod
    def _url(cls, value: str, info: ValidationInfo) -> str:
        if not re.match(r"(sqlite:///.|postgres(ql)?://)", value):
            raise ValueError(
                f"expected sqlite:///path/to/file.db or postgresql://host/db, got {show(value)}"
            )
        return absolute_sqlite_url(value, _root(info))


class ServeConfig(_Section):
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


class AuditConfig(_Section):
    """Where T25's sealing key is (core.control.keyring): the audit log's lines and the
    facts its gates decide on carry a MAC under it. None: `.factory/audit.key` beside this
    file. Serve replicas sharing one store share one key: name the same file on each."""

    key_file: ConfigPath | None = None

    @field_validator("key_file", mode="after")
    @classmethod
    def _absolute(cls, value: Path | None, info: ValidationInfo) -> Path | None:
        return None if value is None else (_root(info) / value.expanduser()).resolve()


class CockpitConfig(_Section):
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


def _refuse_duplicates(noun: str, names: list[str]) -> None:
    seen: set[str] = set()
    for name in names:
        if name in seen:
            raise ValueError(f"two {noun}s are named {name!r}; names must be unique")
        seen.add(name)


# -- the whole file ----------------------------------------------------------------------


class Config(_Section):
    """A validated t25.yaml. Paths in it are absolute; `path` is the file it came from."""

    projects: Annotated[list[ProjectConfig], Field(min_length=1)]
    roles: RoleChains = RoleChains()
    limits: Limits = Limits()
    approval: ApprovalPolicy = ApprovalPolicy()
    policies: Policies = Field(default_factory=Policies)
    qa: QAConfig = QAConfig()
    cost: CostConfig = CostConfig()
    sandbox: Annotated[SandboxConfig, BeforeValidator(_sandbox_shorthand)] = SandboxConfig()
    # Validated from {} so their default relative paths resolve against the file's directory.
    worktrees: WorktreeConfig = Field(default_factory=dict, validate_default=True)
    store: StoreConfig = Field(default_factory=dict, validate_default=True)
    serve: ServeConfig = ServeConfig()
    audit: AuditConfig = AuditConfig()
    cockpit: CockpitConfig = CockpitConfig()
    keys: dict[str, Keys] = {}  # the cockpit's commands on other keys (core.config.keys)

    # Not a key of the file: set by load_config. A Config built in memory acts as if
    # it were read from ./t25.yaml, matching how its relative paths were resolved.
    _path: Path = PrivateAttr(default_factory=lambda: Path.cwd() / CONFIG_FILENAME)

    @field_validator("projects")
    @classmethod
    def _unique(cls, projects: list[ProjectConfig]) -> list[ProjectConfig]:
        _refuse_duplicates("project", [project.name for project in projects])
        return projects

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

    def rate_for(self, model: str | None) -> Rate | None:
        return self.cost.rate_for(model)

    def timeout_for(self, profile: AgentProfile) -> int:
        return profile.timeout_s or self.limits.run_timeout_s


_PER_PROJECT = ("roles", "limits", "qa", "approval", "sandbox")  # sections a project may override


def _profile_name(profile: AgentProfile) -> str:
    return profile.adapter + (f" ({profile.model})" if profile.model else "")


def _overridden(section: _Section, own: _Section) -> _Section:
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
