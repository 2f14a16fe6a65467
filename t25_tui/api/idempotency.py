"""Answers serve remembers for a while, by the `Idempotency-Key` a worker's call carried.

A remote worker retries a call whose answer it did not get (t25_tui.api.worker_client);
the first try may have been done all the same. For the calls that are not idempotent by
themselves (claim, events, complete, release), serve keeps the answer of each key for
`KEEP_S` and gives it again to a retry, which is then not done twice; a retry that arrives
while the first try is still being done waits for it. Only answers below 300 are kept: a
refusal is worked out again; nor is a claim's 204 (no run: nothing was taken).

The answers are kept in this process's memory, at most `LIMIT` of them and none older
than `KEEP_S` (each keep drops the expired ones first, so a long-running serve holds only
the last `KEEP_S` of answers): right for one serve. A retry says so (`RETRY_HEADER`, the
try's number), so that a serve restarted since the first try, which has forgotten its
answer, can still tell a retry from a first call: a retried claim first looks for the
lease its first try may have taken (t25_tui.api.routes.worker), and a completion sent
again under the lease that finished its run is answered as done.
"""

from __future__ import annotations

import asyncio
import time
from collections import OrderedDict
from collections.abc import Awaitable, Callable, MutableMapping
from dataclasses import dataclass
from typing import TypeVar

from fastapi import Request, Response

HEADER = "Idempotency-Key"
RETRY_HEADER = "T25-Retry"  # on the second and later tries of a call: the try's number
MAX_KEY = 100  # characters of a key; a longer one is not honoured
KEEP_S = 600.0
LIMIT = 10_000
T = TypeVar("T")


@dataclass(frozen=True)
class KeptAnswer:
    status: int
    body: bytes
    media_type: str | None
    at: float

    def response(self) -> Response:
        return Response(self.body, status_code=self.status, media_type=self.media_type)


class RecentAnswers:
    """The answers of recent keyed calls, oldest first; bounded in count and age."""

    def __init__(
        self,
        *,
        limit: int = LIMIT,
        keep_s: float = KEEP_S,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.limit, self.keep_s, self.clock = limit, keep_s, clock
        self.kept: OrderedDict[str, KeptAnswer] = OrderedDict()
        self.failed: OrderedDict[str, float] = OrderedDict()  # keys whose try raised
        self.busy: dict[str, asyncio.Lock] = {}

    async def once(
        self,
        request: Request,
        answer: Callable[[], Awaitable[Response]],
        *,
        keep_empty: bool = True,
    ) -> Response:
        """`answer()`, or the answer a call with the same key (and path) was given. Without
        `keep_empty`, a 204 is not kept: a claim that found no run took nothing, and its
        retry may as well claim again (most claims are those of idle workers polling)."""
        given = request.headers.get(HEADER)
        if not given or len(given) > MAX_KEY:
            return await answer()
        key = f"{request.url.path} {given}"
        lock = self.busy.setdefault(key, asyncio.Lock())
        try:
            async with lock:
                kept = self._get(key)
                if kept is not None:
                    return kept.response()
                try:
                    response = await answer()
                except Exception:
                    self._mark_failed(key)
                    raise
                if response.status_code < 300 and (keep_empty or response.status_code != 204):
                    self._keep(key, response)
                return response
        finally:
            if not lock.locked():
                self.busy.pop(key, None)

    def failed_before(self, request: Request) -> bool:
        """An earlier try of this call may have done its work with no answer kept: it raised
        here, or it reached a serve that has since restarted (the call says it is a retry and
        no answer is kept for it)."""
        given = request.headers.get(HEADER)
        if not given:
            return False
        return f"{request.url.path} {given}" in self.failed or bool(
            request.headers.get(RETRY_HEADER)
        )

    def _mark_failed(self, key: str) -> None:
        self._forget_old(self.failed, lambda at: at)
        self.failed[key] = self.clock()
        while len(self.failed) > self.limit:
            self.failed.popitem(last=False)

    def _get(self, key: str) -> KeptAnswer | None:
        kept = self.kept.get(key)
        if kept is not None and self.clock() - kept.at > self.keep_s:
            del self.kept[key]
            return None
        return kept

    def _keep(self, key: str, response: Response) -> None:
        self._forget_old(self.kept, lambda kept: kept.at)
        self.kept[key] = KeptAnswer(
            response.status_code, bytes(response.body), response.media_type, self.clock()
        )
        while len(self.kept) > self.limit:
            self.kept.popitem(last=False)

    def _forget_old(self, kept: MutableMapping[str, T], at: Callable[[T], float]) -> None:
        """Drop the entries older than `keep_s`: the oldest are first (`at` never falls)."""
        expired = self.clock() - self.keep_s
        while kept:
            oldest = next(iter(kept))
            if at(kept[oldest]) > expired:
                return
            del kept[oldest]
