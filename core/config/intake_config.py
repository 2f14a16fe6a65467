"""t25.yaml's `projects[].intake`: the tracker a project's tasks come from.

    projects:
      - name: shop
        intake:
          repo: acme/shop          # the forge's name of the repository (owner/name)
          label: t25               # the issues carrying this label (or `query:`, a search)
          host: github.com         # or a GitHub Enterprise host, or its API's URL
          types: {bug: fix}        # a label → the task's type (feat when none matches)
          priorities: {urgent: 10} # a label → the task's priority (the highest that matches)
          comment: true            # say on the issue which task it became, and how it goes
          announce: [AWAITING_APPROVAL, NEEDS_INPUT, FAILED, DONE]  # the states said there
          every_s: 60              # how often `t25 serve` takes issues in

`t25 intake` (and serve's sweep) files a task per issue, once, whatever restarts or replicas;
an issue closed or unlabelled before its task started implementing cancels it.
"""

from __future__ import annotations

import re
from typing import Annotated, Literal

from pydantic import AfterValidator, Field, model_validator

from core.config.config_section import Section

TaskTypeName = Literal["feat", "fix", "chore", "docs", "refactor"]
AnnouncedState = Literal[
    "SPEC", "PLAN", "AWAITING_APPROVAL", "IMPLEMENTING", "QA", "REVIEW", "PR_OPEN", "DOCS",
    "NEEDS_INPUT", "FAILED", "DONE",
]  # fmt: skip
REPO = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]*/[A-Za-z0-9._-]+$")


def _owner_and_name(repo: str) -> str:
    if not REPO.match(repo):
        raise ValueError(f"{repo!r} is no repository of a forge: name it owner/name")
    return repo


ForgeRepo = Annotated[str, AfterValidator(_owner_and_name)]  # the forge's name of a repository
ANNOUNCED: list[AnnouncedState] = ["AWAITING_APPROVAL", "NEEDS_INPUT", "FAILED", "DONE"]
DEFAULT_TYPES: dict[str, TaskTypeName] = {
    "bug": "fix",
    "documentation": "docs",
    "docs": "docs",
    "chore": "chore",
    "refactor": "refactor",
    "enhancement": "feat",
}


class IntakeConfig(Section):
    """Where a project's tasks come from: a forge's issues, by label or by search."""

    forge: Literal["github"] = "github"
    host: str | None = None  # None: github.com
    repo: ForgeRepo
    label: str | None = None
    query: str | None = None
    types: dict[str, TaskTypeName] = Field(default_factory=lambda: dict(DEFAULT_TYPES))
    priorities: dict[str, int] = {}
    comment: bool = True
    # The states whose entry is said on the issue (with `comment`), once each time.
    announce: list[AnnouncedState] = Field(default_factory=lambda: list(ANNOUNCED))
    every_s: int = Field(default=60, ge=10)  # how often serve takes issues in

    @model_validator(mode="after")
    def _label_or_query(self) -> IntakeConfig:
        if (self.label is None) == (self.query is None):
            raise ValueError("intake takes the issues of a `label` or of a `query`: name one")
        return self

    def type_of(self, labels: tuple[str, ...]) -> TaskTypeName:
        """The task type the first label with one maps to; feat when none does."""
        lowered = {k.lower(): v for k, v in self.types.items()}
        return next(
            (lowered[label.lower()] for label in labels if label.lower() in lowered), "feat"
        )

    def priority_of(self, labels: tuple[str, ...]) -> int:
        """The highest priority a label maps to; 0 when none does."""
        found = [self.priorities[label] for label in labels if label in self.priorities]
        return max(found, default=0)
