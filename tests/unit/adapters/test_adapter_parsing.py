"""The output helpers specs share: JSON event lines, usage, quota reset times."""

from __future__ import annotations

from datetime import UTC, datetime
from zoneinfo import ZoneInfo, ZoneInfoNotFoundError

import pytest

from adapters.parsing import anthropic_usage, json_lines, last_event, reset_time

NOW = datetime(2025, 3, 1, 3, 30, tzinfo=UTC)


def _has_zone(name: str) -> bool:
    try:
        ZoneInfo(name)
    except ZoneInfoNotFoundError:
        return False
    return True


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("You've hit your session limit · resets 5am (UTC)", datetime(2025, 3, 1, 5, 0)),
        ("You've hit your session limit · resets 5:16am (UTC)", datetime(2025, 3, 1, 5, 16)),
        ("resets 2am (UTC)", datetime(2025, 3, 2, 2, 0)),  # already past today
        ("resets 12pm (UTC)", datetime(2025, 3, 1, 12, 0)),
        ("You’ve hit your usage limit. … try again at 5:08 AM.", datetime(2025, 3, 1, 5, 8)),
        pytest.param(
            "resets 6am (Europe/Berlin)",
            datetime(2025, 3, 1, 5, 0),  # CET: UTC+1
            marks=pytest.mark.skipif(
                not _has_zone("Europe/Berlin"), reason="no time zone database on this machine"
            ),
        ),
    ],
)
def test_reset_times_are_read_as_their_next_occurrence_in_utc(text, expected):
    assert reset_time(text, NOW) == expected.replace(tzinfo=UTC)


@pytest.mark.parametrize("text", ["Credit balance is too low", "resets 13pm (UTC)", "resets 25:00"])
def test_text_without_a_valid_time_has_no_reset_time(text):
    assert reset_time(text, NOW) is None


def test_json_lines_skip_what_is_not_a_json_object():
    text = 'banner\n{"type": "init"}\n[1, 2]\n{broken\n  {"type": "result", "n": 1}  \n'
    events = json_lines(text)
    assert events == [{"type": "init"}, {"type": "result", "n": 1}]
    assert last_event(events, "result") == {"type": "result", "n": 1}
    assert last_event(events, "missing") is None


def test_anthropic_usage_tolerates_missing_and_odd_fields():
    usage = anthropic_usage(
        {
            "input_tokens": 10,
            "output_tokens": "7",
            "cache_read_input_tokens": 3,
            "cache_creation_input_tokens": -1,
        },
        "m-1",
    )
    assert (
        usage.input_tokens,
        usage.output_tokens,
        usage.cache_read_tokens,
        usage.cache_write_tokens,
        usage.model,
    ) == (10, 0, 3, 0, "m-1")
    assert anthropic_usage(None, None).input_tokens == 0
