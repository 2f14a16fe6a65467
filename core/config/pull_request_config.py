"""t25.yaml's `projects[].pull_request` and `merge`: the forge a project's pull requests live
on, how PR_OPEN listens to them, and who merges.

    projects:
      - name: shop
        pull_request:
          repo: acme/shop          # the forge's name of the repository (owner/name)
          host: github.com         # or a GitHub Enterprise host, or its API's URL
          watch: true              # wait for CI and reviews before DOCS
          checks: []               # the checks that must pass (none named: every check)
          mention: "@t25"          # a comment with it reaches the next dev run
          members: [OWNER, MEMBER, COLLABORATOR]  # whose comments and reviews count
    merge:
      via: forge                   # `t25 merge` merges the pull request through the forge

Without `pull_request`, PR_OPEN pushes the branch and opens a pull request with `gh` when it
is installed, as before (core.workspace.pull_request).
"""

from __future__ import annotations

from typing import Literal

from pydantic import Field, PositiveFloat

from core.config.config_section import Section
from core.config.intake_config import ForgeRepo

# Who speaks for a repository by default, by their standing to it (GitHub's
# `author_association`): anyone can comment on a public pull request, and a stranger's words
# are not the operator's.
MEMBERS = ("OWNER", "MEMBER", "COLLABORATOR")


class PullRequestConfig(Section):
    """Where a project's pull requests are opened, and how PR_OPEN waits on them."""

    forge: Literal["github"] = "github"
    host: str | None = None  # None: github.com
    repo: ForgeRepo
    watch: bool = True  # wait for CI and reviews; off: open the pull request and go on
    checks: list[str] = []  # the CI checks that must pass; none named: every check reported
    mention: str = Field(default="@t25", min_length=2)  # a comment holding it is for T25
    # Whose comments and reviews count, by their standing to the repository (GitHub's
    # author_association): a stranger's on a public repository are not fed to agents.
    members: list[str] = Field(default_factory=lambda: list(MEMBERS))
    poll_s: PositiveFloat = 30.0  # how often the worker reads the pull request while it waits
    # A pull request with no check reported this long after the push has no CI: it is green.
    settle_s: PositiveFloat = 120.0
    wait_s: PositiveFloat = 3600.0  # CI still running after this: the task asks the operator
    log_lines: int = Field(default=40, ge=1, le=400)  # of a failed check's log, the last lines


class MergeConfig(Section):
    """Who merges an approved task: T25 with git (`git`), or the forge (`forge`), so that the
    pull request's branch protections and required reviews apply."""

    via: Literal["git", "forge"] = "git"
