"""A review's chain passes over the profiles that wrote the change, by the configured rule."""

from __future__ import annotations

import pytest

from core.config.schema import AgentProfile
from core.domain.models import Author
from core.worker.selection import not_the_authors

CLAUDE = AgentProfile(adapter="claude")
OPUS = AgentProfile(adapter="claude", model="claude-opus-4-1")
SONNET = AgentProfile(adapter="claude", model="claude-sonnet-4-5")
CODEX = AgentProfile(adapter="codex")
WROTE_IT = Author(adapter="claude", models=("claude-sonnet-4-5", "claude-sonnet-4-5-20250929"))


def kept(chain, authors, rule):
    return not_the_authors(chain, authors, rule)[0]


def test_off_and_no_author_pass_over_nobody():
    chain = [CLAUDE, SONNET, CODEX]
    assert kept(chain, [WROTE_IT], "off") == chain
    assert kept(chain, [], "model") == chain
    assert kept(chain, [], "adapter") == chain


def test_adapter_passes_over_every_profile_on_an_authors_adapter():
    kept_, passed = not_the_authors([CLAUDE, OPUS, CODEX], [WROTE_IT], "adapter")
    assert kept_ == [CODEX]
    assert passed == [
        "claude: wrote the change (policies.reviewer_differs_from_author: adapter)",
        (
            "claude (claude-opus-4-1): wrote the change "
            "(policies.reviewer_differs_from_author: adapter)"
        ),
    ]


def test_model_keeps_another_model_of_the_same_adapter():
    assert kept([SONNET, OPUS, CODEX], [WROTE_IT], "model") == [OPUS, CODEX]


@pytest.mark.parametrize(
    ("profile", "author"),
    [
        (SONNET, WROTE_IT),  # the model the author's profile named
        (AgentProfile(adapter="claude", model="claude-sonnet-4-5-20250929"), WROTE_IT),  # reported
        (CLAUDE, WROTE_IT),  # the CLI's default: T25 cannot tell it from the author's
        (OPUS, Author(adapter="claude")),  # an author whose model is unknown could be any
    ],
)
def test_model_passes_over_what_it_cannot_tell_from_the_author(profile, author):
    assert kept([profile], [author], "model") == []


def test_every_author_of_the_change_counts():
    authors = [WROTE_IT, Author(adapter="codex", models=("gpt-5",))]
    assert kept([SONNET, AgentProfile(adapter="codex", model="gpt-5"), OPUS], authors, "model") == [
        OPUS
    ]
