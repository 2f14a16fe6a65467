"""t25.yaml's policy sections: which plans wait for approval, the paths a change may not
touch unnamed (`policies`), and QA's checks."""

from __future__ import annotations

import re
from pathlib import PurePosixPath
from typing import Annotated, Literal

from pydantic import (
    Field,
    PositiveInt,
    field_validator,
)

from core.config.agent_files import AGENT_CLI_FILES
from core.config.config_section import (
    Argv,
    HostEntry,
    Risk,
    Section,
    refuse_duplicates,
)
from core.config.locate import CONFIG_FILENAME as CONFIG_FILENAME
from core.config.locate import INIT_HINT as INIT_HINT
from core.config.locate import find_config as find_config
from core.config.locate import task_tree_of as task_tree_of
from core.config.source import (
    show,
)


class ApprovalPolicy(Section):
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


class Policies(Section):
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


class QACheck(Section):
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


class QAConfig(Section):
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
        refuse_duplicates("check", [check.name for check in checks])
        return checks
