"""Reading agent CLI output: JSON event lines, token usage, and quota reset times.

Specs share these so each stays a few lines: most CLIs print one JSON event per line, report
usage in Anthropic- or OpenAI-shaped dictionaries, and name the time a quota resets in text
such as "resets 5am (UTC)" or "try again at 5:08 AM".
"""

from __future__ import annotations

import json
import re
from datetime import datetime, timedelta, timezone
from zoneinfo import ZoneInfo, ZoneInfoNotFoundError

from core.models import Usage


def json_lines(text: str) -> list[dict]:
    """Every line of `text` that is a JSON object; anything else (banners, noise) is skipped."""
    events = []
    for line in text.splitlines():
        line = line.strip()
        if not line.startswith("{"):
            continue
        try:
            value = json.loads(line)
        except ValueError:
            continue
        if isinstance(value, dict):
            events.append(value)
    return events


def last_event(events: list[dict], type_: str) -> dict | None:
    """The last event whose "type" is `type_`."""
    return next((e for e in reversed(events) if e.get("type") == type_), None)


def anthropic_usage(usage: dict | None, model: str | None) -> Usage:
    """Usage from an Anthropic-shaped dictionary (Claude Code's stream-json, the scripted agent)."""
    usage = usage if isinstance(usage, dict) else {}

    def count(key: str) -> int:
        value = usage.get(key)
        return value if type(value) is int and value >= 0 else 0  # not bool

    return Usage(input_tokens=count("input_tokens"), output_tokens=count("output_tokens"),
                 cache_read_tokens=count("cache_read_input_tokens"),
                 cache_write_tokens=count("cache_creation_input_tokens"), model=model)


_RESET = re.compile(
    r"(?:resets|try again at)\s+(?:at\s+)?(?P<hour>\d{1,2})(?::(?P<minute>\d{2}))?\s*"
    r"(?P<half>[ap]\.?m\.?)?\s*(?:\((?P<zone>[A-Za-z_/+-]+)\))?",
    re.IGNORECASE,
)


def reset_time(text: str, now: datetime | None = None) -> datetime | None:
    """The next moment named by "resets 5am (UTC)" / "try again at 5:08 AM" in `text`, in UTC.

    A clock time without a date means its next occurrence; without a zone, UTC.
    """
    match = _RESET.search(text)
    if not match:
        return None
    hour, minute = int(match["hour"]), int(match["minute"] or 0)
    if match["half"]:
        if not 1 <= hour <= 12:
            return None
        hour = hour % 12 + (12 if match["half"].lower().startswith("p") else 0)
    if hour > 23 or minute > 59:
        return None
    try:
        zone = ZoneInfo(match["zone"]) if match["zone"] else timezone.utc
    except (ZoneInfoNotFoundError, ValueError):
        zone = timezone.utc
    local_now = (now or datetime.now(timezone.utc)).astimezone(zone)
    moment = local_now.replace(hour=hour, minute=minute, second=0, microsecond=0)
    if moment <= local_now:
        moment += timedelta(days=1)
    return moment.astimezone(timezone.utc)
