"""Which adapter plays a role: the first of the role's fallback chain whose binary exists and
whose quota is not exhausted. The run records which and why.

A REVIEW run first passes over the profiles that wrote the change it reviews
(`not_the_authors`, by policies.reviewer_differs_from_author): a model does not review its
own work."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from datetime import datetime
from typing import TYPE_CHECKING

from core.domain.models import Author, utcnow
from core.errors import NoAdapter
from core.ports.agents import AgentAdapter

if TYPE_CHECKING:
    from core.config.schema import AgentProfile


@dataclass
class QuotaBook:
    """Adapters whose quota is exhausted, and until when (None: until further notice)."""

    exhausted: dict[str, datetime | None] = field(default_factory=dict)

    def mark(self, adapter: str, until: datetime | None) -> None:
        self.exhausted[adapter] = until

    def blocked_until(self, adapter: str, now: datetime) -> datetime | bool | None:
        """False when usable; otherwise the reset time (or None when unknown)."""
        if adapter not in self.exhausted:
            return False
        until = self.exhausted[adapter]
        if until is not None and until <= now:
            del self.exhausted[adapter]
            return False
        return until


@dataclass(frozen=True)
class Selection:
    adapter: AgentAdapter
    profile: AgentProfile
    reason: str


def select_adapter(
    chain: Sequence[AgentProfile],
    adapters: Mapping[str, AgentAdapter],
    quota: QuotaBook,
    *,
    role: str,
    now: datetime | None = None,
    skip: frozenset[str] = frozenset(),
) -> Selection:
    """The first profile whose adapter is known, installed and not out of quota."""
    now = now or utcnow()
    passed: list[str] = []
    for position, profile in enumerate(chain, start=1):
        name = profile.adapter
        adapter = adapters.get(name)
        if name in skip:
            passed.append(f"{name}: failed earlier in this run (quota, overload or login)")
        elif adapter is None:
            passed.append(f"{name}: no such adapter (known: {', '.join(sorted(adapters))})")
        elif (until := quota.blocked_until(name, now)) is not False:
            when = f" until {until:%Y-%m-%d %H:%M} UTC" if until else ""
            passed.append(f"{name}: quota exhausted{when}")
        elif adapter.locate() is None:
            passed.append(f"{name}: binary not found on PATH")
        else:
            reason = "first in the chain" if position == 1 else "; ".join(passed)
            return Selection(adapter, profile, f"{name} for {role}: {reason}")
    raise NoAdapter(
        f"no agent can play {role}: " + "; ".join(passed),
        hint=f"install one of them, or change roles.{role} in t25.yaml (see `t25 doctor`)",
    )


def not_the_authors(
    chain: Sequence[AgentProfile], authors: Sequence[Author], rule: str
) -> tuple[list[AgentProfile], list[str]]:
    """The profiles of a review chain that did not write the change, in order, and one note
    for each profile passed over. `rule` is policies.reviewer_differs_from_author: `adapter`
    passes over every profile on an author's adapter; `model`, those on an author's adapter
    running one of its models, or a model T25 cannot tell from it (a profile that names no
    model runs the CLI's default, and an author whose model is unknown could be any);
    `off` passes over none."""
    if rule == "off" or not authors:
        return list(chain), []
    kept: list[AgentProfile] = []
    passed: list[str] = []
    for profile in chain:
        if any(_same(profile, author, rule) for author in authors):
            name = profile.adapter + (f" ({profile.model})" if profile.model else "")
            passed.append(
                f"{name}: wrote the change (policies.reviewer_differs_from_author: {rule})"
            )
        else:
            kept.append(profile)
    return kept, passed


def _same(profile: AgentProfile, author: Author, rule: str) -> bool:
    if profile.adapter != author.adapter:
        return False
    if rule == "adapter":
        return True
    return profile.model is None or not author.models or profile.model in author.models
