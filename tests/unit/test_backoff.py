"""The pauses every retry loop takes (core.domain.backoff): doubling, capped, jittered
within the cap, bounded when asked; and `retry`, which tries again only what is transient."""

from __future__ import annotations

import itertools
import random

import pytest

from core.domain.backoff import Backoff, retry


def test_pauses_double_up_to_the_longest() -> None:
    pauses = Backoff(0.5, 10.0).pauses()
    assert list(itertools.islice(pauses, 8)) == [0.5, 1.0, 2.0, 4.0, 8.0, 10.0, 10.0, 10.0]


def test_a_limit_bounds_the_pauses() -> None:
    assert list(Backoff(0.05, 1.0).pauses(3)) == [0.05, 0.1, 0.2]
    assert list(Backoff(0.05, 1.0).pauses(0)) == []


def test_another_factor_grows_by_it() -> None:
    assert list(Backoff(1.0, 100.0, factor=3.0).pauses(4)) == [1.0, 3.0, 9.0, 27.0]
    assert list(Backoff(0.2, 0.2, factor=1.0).pauses(3)) == [0.2, 0.2, 0.2]


def test_jitter_draws_each_pause_below_its_plain_value_and_never_past_the_cap() -> None:
    plain = list(Backoff(0.5, 4.0).pauses(10))
    draws = random.Random(25)
    jittered = list(Backoff(0.5, 4.0, jitter=0.5).pauses(10, rand=draws.random))
    for pause, value in zip(plain, jittered, strict=True):
        assert pause * 0.5 <= value <= pause <= 4.0
    assert jittered != plain


def test_full_jitter_reaches_zero_and_none_keeps_the_plain_pause() -> None:
    assert list(Backoff(1.0, 2.0, jitter=1.0).pauses(2, rand=lambda: 1.0)) == [0.0, 0.0]
    assert list(Backoff(1.0, 2.0, jitter=1.0).pauses(2, rand=lambda: 0.0)) == [1.0, 2.0]


@pytest.mark.parametrize(
    "kwargs",
    [
        {"first_s": -1.0, "longest_s": 1.0},
        {"first_s": 2.0, "longest_s": 1.0},
        {"first_s": 1.0, "longest_s": 2.0, "factor": 0.5},
        {"first_s": 1.0, "longest_s": 2.0, "jitter": 1.5},
    ],
)
def test_a_backoff_that_makes_no_sense_is_refused(kwargs: dict[str, float]) -> None:
    with pytest.raises(ValueError):
        Backoff(**kwargs)


class Flaky(Exception):
    pass


async def test_retry_tries_again_after_each_transient_failure_with_the_next_pause() -> None:
    slept: list[float] = []
    tries: list[int] = []

    async def attempt(n: int) -> str:
        tries.append(n)
        if n < 2:
            raise Flaky()
        return "done"

    async def sleep(pause: float) -> None:
        slept.append(pause)

    result = await retry(
        attempt,
        pauses=Backoff(0.1, 1.0).pauses(5),
        transient=lambda exc: isinstance(exc, Flaky),
        sleep=sleep,
    )
    assert result == "done"
    assert tries == [0, 1, 2]
    assert slept == [0.1, 0.2]


async def test_retry_raises_the_last_failure_once_the_pauses_run_out() -> None:
    tries: list[int] = []

    async def attempt(n: int) -> None:
        tries.append(n)
        raise Flaky(n)

    with pytest.raises(Flaky) as raised:
        await retry(attempt, pauses=[0.0, 0.0], transient=lambda exc: True)
    assert tries == [0, 1, 2]
    assert raised.value.args == (2,)


async def test_retry_never_tries_again_after_a_failure_that_is_not_transient() -> None:
    tries: list[int] = []

    async def attempt(n: int) -> None:
        tries.append(n)
        raise ValueError("for good")

    with pytest.raises(ValueError, match="for good"):
        await retry(attempt, pauses=[0.0] * 5, transient=lambda exc: isinstance(exc, Flaky))
    assert tries == [0]
