"""t25.yaml read again while T25 runs: what applies at once, what waits for a restart.

A running cockpit, `t25 serve` or `t25 run --follow` looks at its t25.yaml at the next
decision (a run's completion, an operator's decision; the cockpit also every few seconds).
A file that changed is validated first: a broken one keeps the configuration in force, and
the line says why. Of a valid one, the keys the control plane decides with apply at once,
and the line names them; the others - what the processes were started with - apply after
a restart, and the line says so:

- at once: `approval`, `policies`, `cost`, and the `limits` the control plane weighs at each
  decision (`LIVE_LIMITS`: the change's size, the loops, the budgets);
- after a restart: `projects` (their own overrides too), `roles`, `qa`, `sandbox`,
  `worktrees`, `store`, `serve`, `audit`, `cockpit`, `keys`, and the `limits` each run is
  started with (its timeout, caps, logs, the number of workers).
"""

from __future__ import annotations

import hashlib
import logging
from dataclasses import dataclass
from pathlib import Path

from core.config.schema import Config, Limits, load_config
from core.errors import ConfigError

log = logging.getLogger("t25.control")

LIVE_SECTIONS = ("approval", "policies", "cost")
LIVE_LIMITS = frozenset(
    {
        "max_files_changed",
        "max_diff_lines",
        "max_review_loops",
        "max_qa_loops",
        "max_ci_loops",
        "max_new_dependencies",
        "max_cost_usd",
        "max_tokens",
        "by_role",
        "max_file_bytes",
    }
)


@dataclass(frozen=True)
class Reread:
    """What reading t25.yaml again found."""

    config: Config  # the configuration in force now
    applied: tuple[str, ...] = ()  # keys that changed and apply from now on
    restart: tuple[str, ...] = ()  # keys that changed and apply after a restart
    error: str | None = None  # the file does not load: the configuration in force stays

    def line(self) -> str:
        """One line for a status line or a log."""
        if self.error is not None:
            return f"t25.yaml changed but does not load, so nothing of it applies: {self.error}"
        parts = []
        if self.applied:
            parts.append(f"{', '.join(self.applied)} now in force")
        if self.restart:
            parts.append(f"restart to apply {', '.join(self.restart)}")
        return "t25.yaml changed: " + ("; ".join(parts) or "nothing that matters")


class ConfigFile:
    """The t25.yaml a configuration came from, watched for changes by its content."""

    def __init__(self, config: Config) -> None:
        self.path = config.path
        self._seen = _digest(self.path)
        self.notice: str | None = None  # what the last reread found, for a status line

    def reread(self, current: Config) -> Reread | None:
        """None when the file is as last seen; else what reading it again gives, also kept
        as `notice` and logged."""
        seen = _digest(self.path)
        if seen == self._seen:
            return None
        self._seen = seen
        found = self._read(current)
        self.notice = found.line()
        log.warning("t25: %s", self.notice)
        return found

    def _read(self, current: Config) -> Reread:
        try:
            found = load_config(self.path)
        except ConfigError as exc:
            return Reread(current, error=exc.message)
        applied, restart = _split(current, found)
        live = {k: getattr(found, k) for k in LIVE_SECTIONS if k in applied}
        limits = {k: getattr(found.limits, k) for k in LIVE_LIMITS}
        updated = current.model_copy(
            update={**live, "limits": current.limits.model_copy(update=limits)}
        )
        return Reread(updated, applied, restart)


def _split(current: Config, found: Config) -> tuple[tuple[str, ...], tuple[str, ...]]:
    """The changed keys that apply at once, and those that wait for a restart."""
    applied: list[str] = []
    restart: list[str] = []
    for name in Config.model_fields:
        if name == "limits" or getattr(current, name) == getattr(found, name):
            continue
        (applied if name in LIVE_SECTIONS else restart).append(name)
    for name in Limits.model_fields:
        if getattr(current.limits, name) != getattr(found.limits, name):
            (applied if name in LIVE_LIMITS else restart).append(f"limits.{name}")
    return tuple(applied), tuple(restart)


def _digest(path: Path) -> str | None:
    try:
        return hashlib.sha256(path.read_bytes()).hexdigest()
    except OSError:
        return None
