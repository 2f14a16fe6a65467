"""Reading agent CLI output: JSON event lines, token usage, and quota reset times.

Specs share these so each stays a few lines: most CLIs print one JSON event per line, report
usage in Anthropic-shaped dictionaries (Claude Code, and the scripted agent that copies it)
or their own, and name the time a quota resets in text such as "resets 5am (UTC)" or "try
again at 5:08 AM". What one CLI alone prints - its events, its usage, its tokens per model
request - is read in its own `adapters/<cli>.py`; only what several share is here.

What a CLI printed is read within bounds: each line through `core.domain.agent_json` (too
long or nested too deep, it is skipped like any other line that is not an event), each
count at most `MAX_COUNT`, each number finite.
"""

from __future__ import annotations

import math
import re
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta, tzinfo
from typing import Any
from zoneinfo import ZoneInfo, ZoneInfoNotFoundError

from core.domain import agent_json
from core.domain.agent import Failure
from core.domain.models import Usage

# One JSON object as `json.loads` gives it: whatever a CLI printed may be inside.
JsonObject = dict[str, Any]


def json_lines(text: str) -> list[JsonObject]:
    """Every line of `text` that is a JSON object; anything else (banners, noise) is skipped."""
    events: list[JsonObject] = []
    for line in text.splitlines():
        line = line.strip()
        if not line.startswith("{"):
            continue
        try:
            value = agent_json.loads(line)
        except ValueError:  # not JSON, or beyond agent_json's bounds: not an event
            continue
        if isinstance(value, dict):
            events.append(value)
    return events


def last_event(events: list[JsonObject], type_: str) -> JsonObject | None:
    """The last event whose "type" is `type_`."""
    return next((e for e in reversed(events) if e.get("type") == type_), None)


def object_at(mapping: JsonObject, key: str) -> JsonObject:
    """The object under `key`, or an empty one when it is missing or something else."""
    value = mapping.get(key)
    return value if isinstance(value, dict) else {}


def list_at(mapping: JsonObject, key: str) -> list[Any]:
    """The list under `key`, or an empty one when it is missing or something else."""
    value = mapping.get(key)
    return value if isinstance(value, list) else []


# A token count no run comes near (a trillion), and far from the stores' 64-bit integers
# even summed over every run of a task.
MAX_COUNT = 10**12


def count(value: object) -> int:
    """A count as a CLI reports it: a non-negative integer (not a bool) up to MAX_COUNT,
    else 0."""
    return value if type(value) is int and 0 <= value <= MAX_COUNT else 0


def count_at(mapping: JsonObject, key: str) -> int:
    """The count under `key` (`count`)."""
    return count(mapping.get(key))


def number(value: object) -> float | None:
    """A finite JSON number (not a bool) as a float; None for anything else."""
    if isinstance(value, (int, float)) and not isinstance(value, bool):
        try:
            found = float(value)
        except OverflowError:  # an integer of hundreds of digits
            return None
        return found if math.isfinite(found) else None
    return None


def anthropic_usage(usage: object, model: str | None) -> Usage:
    """Usage from an Anthropic-shaped dictionary (Claude Code's stream-json, the scripted agent)."""
    counts = usage if isinstance(usage, dict) else {}
    return Usage(
        input_tokens=count_at(counts, "input_tokens"),
        output_tokens=count_at(counts, "output_tokens"),
        cache_read_tokens=count_at(counts, "cache_read_input_tokens"),
        cache_write_tokens=count_at(counts, "cache_creation_input_tokens"),
        model=model,
    )


_RESET = re.compile(
    r"(?:resets|try again at)\s+(?:at\s+)?(?P<hour>\d{1,2})(?::(?P<minute>\d{2}))?\s*"
    r"(?P<half>[ap]\.?m\.?)?\s*(?:\((?P<zone>[A-Za-z_/+-]+)\))?",
    re.IGNORECASE,
)


def _clock_time(match: re.Match[str]) -> tuple[int, int] | None:
    """(hour, minute) on a 24-hour clock, or None for a time no clock shows."""
    hour, minute = int(match["hour"]), int(match["minute"] or 0)
    if match["half"]:
        if not 1 <= hour <= 12:
            return None
        hour = hour % 12 + (12 if match["half"].lower().startswith("p") else 0)
    return None if hour > 23 or minute > 59 else (hour, minute)


def _zone(name: str | None) -> tzinfo:
    """The named time zone; UTC when none is named or the name is unknown."""
    try:
        return ZoneInfo(name) if name else UTC
    except (ZoneInfoNotFoundError, ValueError):
        return UTC


def reset_time(text: str, now: datetime | None = None) -> datetime | None:
    """The next moment named by "resets 5am (UTC)" / "try again at 5:08 AM" in `text`, in UTC.

    A clock time without a date means its next occurrence; without a zone, UTC.
    """
    match = _RESET.search(text)
    if not match:
        return retry_after(text, now)
    clock = _clock_time(match)
    if clock is None:
        return None
    hour, minute = clock
    zone = _zone(match["zone"])
    local_now = (now or datetime.now(UTC)).astimezone(zone)
    moment = local_now.replace(hour=hour, minute=minute, second=0, microsecond=0)
    if moment <= local_now:
        moment += timedelta(days=1)
    return moment.astimezone(UTC)


# The real messages, lower-cased, by what they mean (see testing.md and the captures).
# Quota: the provider will not serve this login for a while; another adapter may.
QUOTA_MARKERS = (
    "hit your session limit",
    "hit your usage limit",
    "hit your weekly limit",
    "credit balance is too low",
    "quota exceeded",
    "exceeded your current quota",
    "exhausted your daily quota",
    "resource has been exhausted",
    "resource_exhausted",
    "rate limit",
    "rate_limit",
    "ratelimiterror",
    "too many requests",
    "request rejected (429)",
    "status: 429",
    "(429)",
    "insufficient_quota",
    "usage limit",
)
# Overload: transient trouble on the provider's side; the same adapter may work in a moment.
OVERLOAD_MARKERS = (
    "overloaded",
    "at capacity",
    "high demand",
    "529",
    "503 service unavailable",
    "internal server error",
    "server_error",
    '"code":500',
    "status: 500",
    "status: 503",
    "temporarily unavailable",
)


# Login: the CLI has no working login here (none, expired, a key the provider refuses);
# another adapter may have one. Claude Code prints "Not logged in · Please run /login" or
# "Invalid API key · Please run /login" (its assistant event says "authentication_failed");
# Codex, "Not logged in" or a 401; Gemini CLI asks for an auth method.
LOGIN_MARKERS = (
    "not logged in",
    "please run /login",
    "invalid api key",
    "authentication_failed",
    "authentication_error",
    "invalid x-api-key",
    "401 unauthorized",
    "status: 401",
    "(401)",
    "please set an auth method",
    "oauth token has expired",
)


def classify_error(text: str) -> Failure | None:
    """QUOTA, LOGIN, OVERLOAD or None for one error message; quota wins, then login."""
    low = text.lower()
    if any(marker in low for marker in QUOTA_MARKERS):
        return Failure.QUOTA
    if any(marker in low for marker in LOGIN_MARKERS):
        return Failure.LOGIN
    if any(marker in low for marker in OVERLOAD_MARKERS):
        return Failure.OVERLOAD
    return None


_IN = re.compile(
    r"try again in\s+(?P<n>\d+(?:\.\d+)?)\s*(?P<unit>ms|s|sec|seconds?|m|min|minutes?|h|hours?)\b",
    re.IGNORECASE,
)


# The furthest "try again in ..." taken at its word; past it the wait is not believed.
MAX_RETRY_AFTER = timedelta(days=366)


def retry_after(text: str, now: datetime | None = None) -> datetime | None:
    """ "try again in 1s" / "in 5 minutes" as a moment in UTC; None when not said, or
    further off than MAX_RETRY_AFTER."""
    match = _IN.search(text)
    if not match:
        return None
    unit = match["unit"].lower()
    scale = (
        0.001
        if unit == "ms"
        else 60
        if unit.startswith("m")
        else 3600
        if unit.startswith("h")
        else 1
    )
    seconds = float(match["n"]) * scale  # digits only: finite, or inf past a float's range
    if not seconds <= MAX_RETRY_AFTER.total_seconds():
        return None
    return (now or datetime.now(UTC)) + timedelta(seconds=seconds)


def epoch(value: object) -> datetime | None:
    """A Unix timestamp (seconds) as an aware datetime; None for anything else."""
    seconds = number(value)
    if seconds is not None and 0 < seconds < 32503680000:  # before the year 3000
        return datetime.fromtimestamp(seconds, UTC)
    return None


def text_of(value: object) -> str:
    """A string field, or "" for anything else."""
    return value if isinstance(value, str) else ""


def message_of(detail: object) -> str:
    """An error's text: the detail itself, or its `message` when it is an object."""
    return text_of(detail.get("message") if isinstance(detail, dict) else detail)


def summed(requests: tuple[Usage, ...]) -> Usage:
    """The four counts of `requests` added up, each at most MAX_COUNT (no model: they may
    name several)."""

    def total(counts: Iterator[int]) -> int:
        return min(sum(counts), MAX_COUNT)

    return Usage(
        input_tokens=total(r.input_tokens for r in requests),
        output_tokens=total(r.output_tokens for r in requests),
        cache_read_tokens=total(r.cache_read_tokens for r in requests),
        cache_write_tokens=total(r.cache_write_tokens for r in requests),
    )
