"""How long to pause between tries of something that failed for now.

Every retry loop in T25 takes its pauses from a `Backoff`: the first pause, each later one
`factor` times the one before, never more than the longest. A loop that can give up asks
for a bounded number of pauses; one that waits out an outage takes them endlessly and starts
a fresh sequence when the outage ends. Jitter spreads the pauses of many clients that
failed at the same moment (a restarted server), so they do not all come back at once.

`retry` is the loop itself for an operation that is simply tried again: it calls the
operation until it succeeds, pausing after each failure it is told is transient, and raises
the last failure once the pauses run out.
"""

from __future__ import annotations

import asyncio
import itertools
import random
from collections.abc import Awaitable, Callable, Iterable, Iterator
from dataclasses import dataclass
from typing import TypeVar

T = TypeVar("T")


@dataclass(frozen=True)
class Backoff:
    """Pauses of `first_s`, growing by `factor` each time, capped at `longest_s`.

    With `jitter` (a fraction from 0 to 1), each pause is drawn at random from
    `[(1 - jitter) * pause, pause]`: never longer than without jitter, so the cap holds.
    """

    first_s: float
    longest_s: float
    factor: float = 2.0
    jitter: float = 0.0

    def __post_init__(self) -> None:
        if not 0 <= self.first_s <= self.longest_s:
            raise ValueError(
                f"a backoff pauses 0 <= first ({self.first_s}) <= longest ({self.longest_s}) s"
            )
        if self.factor < 1:
            raise ValueError(f"a backoff's pauses do not shrink: factor {self.factor} < 1")
        if not 0 <= self.jitter <= 1:
            raise ValueError(f"jitter is a fraction from 0 to 1, not {self.jitter}")

    def pauses(
        self, limit: int | None = None, *, rand: Callable[[], float] = random.random
    ) -> Iterator[float]:
        """The pauses in order: `limit` of them, or endlessly. `rand` (in [0, 1)) draws the
        jitter."""
        pause = self.first_s
        for _ in range(limit) if limit is not None else itertools.count():
            yield pause * (1 - self.jitter * rand()) if self.jitter else pause
            pause = min(pause * self.factor, self.longest_s)

    def within(self, total_s: float) -> Iterator[float]:
        """The pauses in order for as long as they add up to no more than `total_s`."""
        waited = 0.0
        for pause in self.pauses():
            if waited + pause > total_s:
                return
            waited += pause
            yield pause


async def retry(
    attempt: Callable[[int], Awaitable[T]],
    *,
    pauses: Iterable[float],
    transient: Callable[[Exception], bool],
    sleep: Callable[[float], Awaitable[None]] = asyncio.sleep,
) -> T:
    """`await attempt(n)` for n = 0, 1, ... until it returns; after a failure `transient`
    accepts, pause for the next of `pauses` and try again. Any other failure, or a transient
    one when the pauses have run out, is raised as it is."""
    remaining = iter(pauses)
    for n in itertools.count():
        try:
            return await attempt(n)
        except Exception as exc:
            pause = next(remaining, None) if transient(exc) else None
            if pause is None:
                raise
        await sleep(pause)
    raise AssertionError("itertools.count() does not end")
