"""Text at the door and on the way out: bounds, control characters, escapes."""

from __future__ import annotations

import pytest

from core.domain import text
from core.errors import InvalidInput


@pytest.mark.parametrize(
    "bad",
    [
        "\x1b[2J",
        "a\x00b",
        "x\u2028y",
        "x\u2029y",
        "x\x85y",
        "x\ud800y",
        "x\u202ey",
        "a\nb",
        "a\rb",
        "a\tb",
        "\x7f",
    ],
)
def test_a_title_refuses_control_characters_and_line_breaks_without_echoing_them(bad):
    with pytest.raises(InvalidInput) as refused:
        text.title(f"Fix {bad} login")
    assert "U+" in refused.value.message and bad not in refused.value.message


def test_bounds_are_characters_and_the_refusal_says_the_numbers():
    assert text.title("  é" * 1 + "x" * 197 + "  ") == "é" + "x" * 197
    with pytest.raises(InvalidInput, match="201 characters long; at most 200"):
        text.title("x" * 201)
    with pytest.raises(InvalidInput, match="title cannot be empty"):
        text.title("   ")
    with pytest.raises(InvalidInput, match="actor is 101 characters"):
        text.actor("a" * 101)


def test_multi_line_text_keeps_newlines_and_tabs_and_normalises_crlf():
    assert text.description("one\r\n\ttwo\n") == "one\n\ttwo\n"
    with pytest.raises(InvalidInput, match=r"U\+001B"):
        text.reason("fine\n\x1b]0;pwned\x07")
    with pytest.raises(InvalidInput, match=r"U\+2028"):
        text.reason("a\u2028b")


def test_printable_escapes_what_the_door_refuses():
    assert text.printable("a\x1b[31mb\u2028c\nd") == "a\\x1b[31mb\\u2028c\\x0ad"
    assert text.printable("a\x1b\nb\tc", multiline=True) == "a\\x1b\nb\tc"
    assert text.printable("plain — ünïcode ✓") == "plain — ünïcode ✓"
