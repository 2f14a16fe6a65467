"""Titles and descriptions sent to a real `t25 serve` over real HTTP meet the same door as
the command line's and the cockpit's: `ControlPlane.new_task` refuses them, and nothing is stored."""

from __future__ import annotations

import httpx
import pytest

from core.domain.text import MAX_TITLE
from tests.support.operators import operator_headers


@pytest.mark.parametrize(
    ("body", "said"),
    [
        ({"title": "nul \x00 here"}, "title holds a control character (U+0000"),
        ({"title": "evil \x1b]0;pwned\x07"}, "title holds a control character (U+001B"),
        ({"title": "two\nlines"}, "title holds a line break"),
        ({"title": "x" * (MAX_TITLE + 1)}, "at most 200"),
        ({"title": "fine", "description": "nul \x00"}, "description holds a control character"),
    ],
)
def test_rest_refuses_control_characters_and_long_titles_at_the_door(serve, repo, body, said):
    ops = operator_headers(repo)  # the token serve made for its host's operator
    answer = httpx.post(f"{serve}/tasks", json=body, timeout=30, headers=ops)
    assert 400 <= answer.status_code < 500 and answer.status_code != 401, answer.text
    assert said in answer.json()["error"] and answer.json()["hint"]
    assert "pwned" not in answer.text  # the refusal never echoes the text
    assert httpx.get(f"{serve}/tasks", timeout=30, headers=ops).json() == []
