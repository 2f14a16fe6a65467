"""Where T25 gets the time: a clock injected into everything that stamps one.

The control plane stamps the events it records, the audit log its lines, the embedded
store its rows; each takes a `Clock` instead of calling `datetime.now` itself, so a
seeded board (the demo, the screenshots, the snapshot tests) is written on a timeline of
its own rather than rewritten afterwards.
"""

from __future__ import annotations

from collections.abc import Callable
from datetime import UTC, datetime

Clock = Callable[[], datetime]
"""Returns the time now, as an aware datetime in UTC."""


def system_clock() -> datetime:
    """The machine's clock: what every T25 process uses outside a seeded board."""
    return datetime.now(UTC)
