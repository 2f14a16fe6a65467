"""The answers serve keeps for retried worker calls (t25_tui.api.idempotency) are bounded in
age as well as count: a serve that runs for days holds the last `keep_s` of them, not the
last `limit`."""

from __future__ import annotations

from fastapi import Request, Response

from t25_tui.api.idempotency import HEADER, RecentAnswers


def _call(key: str) -> Request:
    return Request(
        {
            "type": "http",
            "method": "POST",
            "path": "/worker/claim",
            "query_string": b"",
            "headers": [(HEADER.lower().encode(), key.encode())],
        }
    )


async def _answered(
    answers: RecentAnswers,
    key: str,
    body: bytes = b"{}",
    *,
    status: int = 200,
    keep_empty: bool = True,
) -> bytes:
    async def answer() -> Response:
        return Response(body, status_code=status, media_type="application/json")

    return bytes((await answers.once(_call(key), answer, keep_empty=keep_empty)).body)


async def test_answers_older_than_keep_s_are_let_go_as_new_ones_come():
    answers = RecentAnswers(limit=1000, keep_s=0.0)  # every answer has expired by the next call
    for n in range(50):
        await _answered(answers, f"call-{n}")
    assert list(answers.kept) == ["/worker/claim call-49"]


async def test_a_retry_within_keep_s_still_gets_the_first_answer():
    now = [0.0]
    answers = RecentAnswers(limit=1000, keep_s=600, clock=lambda: now[0])
    await _answered(answers, "k", b'{"first": true}')
    now[0] = 599.0
    await _answered(answers, "other")
    assert await _answered(answers, "k", b'{"second": true}') == b'{"first": true}'


async def test_a_claim_that_found_no_run_is_not_kept():
    answers = RecentAnswers(limit=1000, keep_s=600)
    for n in range(50):  # idle workers polling
        await _answered(answers, f"poll-{n}", b"", status=204, keep_empty=False)
    await _answered(answers, "events", b"", status=204)  # events sent: kept, never twice
    assert list(answers.kept) == ["/worker/claim events"]
