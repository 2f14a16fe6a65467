"""A remote worker's outbox: output sent in order, held while serve is away, bounded."""

from __future__ import annotations

import asyncio
from typing import Any

from core.errors import ControlPlaneUnreachable, LeaseLost
from t25_tui.api.outbox import Outbox


def output(text: str) -> dict[str, Any]:
    return {"kind": "run_output", "stream": "stdout", "text": text}


class Serve:
    """Takes batches of events when it is up; away, every send waits until it is back."""

    def __init__(self) -> None:
        self.up = asyncio.Event()
        self.asked = asyncio.Event()  # a send was tried
        self.taken: list[dict[str, Any]] = []
        self.refusal: Exception | None = None

    async def send(self, events: list[dict[str, Any]]) -> None:
        self.asked.set()
        await asyncio.wait_for(self.up.wait(), 10)
        if self.refusal is not None:
            raise self.refusal
        self.taken += events


async def test_output_put_while_serve_is_away_is_sent_in_order_once_it_is_back():
    serve = Serve()
    box = Outbox("R-1", serve.send)
    for n in range(200):
        box.put(output(f"line {n}\n"))
    await asyncio.wait_for(serve.asked.wait(), 10)  # it tried while serve was away ...
    assert serve.taken == []  # ... and nothing was taken
    serve.up.set()
    await asyncio.wait_for(box.drain(), 10)
    assert [e["text"] for e in serve.taken] == [f"line {n}\n" for n in range(200)]


async def test_output_past_the_bound_is_dropped_and_the_run_is_told_how_much():
    serve = Serve()
    box = Outbox("R-1", serve.send, limit_chars=100)
    box.put({"kind": "run_started", "worker": "w"})
    for _ in range(30):
        box.put(output("x" * 9 + "\n"))  # 300 characters: 200 past the bound
    box.put({"kind": "run_started", "worker": "w"})  # not output: always kept
    serve.up.set()
    await asyncio.wait_for(box.drain(), 10)
    texts = [e.get("text") for e in serve.taken]
    assert texts.count("x" * 9 + "\n") == 10
    assert texts[-1] == (
        "[t25: 200 characters of output were dropped while serve was unreachable]\n"
    )
    assert [e["kind"] for e in serve.taken].count("run_started") == 2


async def test_a_lost_lease_ends_the_outbox_and_a_refused_batch_does_not():
    serve = Serve()
    serve.up.set()
    box = Outbox("R-1", serve.send)
    serve.refusal = ControlPlaneUnreachable("refused for good")  # logged, the rest goes on
    box.put(output("refused\n"))
    await asyncio.wait_for(box.drain(), 10)
    serve.refusal = None
    box.put(output("kept\n"))
    await asyncio.wait_for(box.drain(), 10)
    serve.refusal = LeaseLost("the lease is gone")
    box.put(output("after the lease\n"))
    await asyncio.wait_for(box.drain(), 10)
    box.put(output("never sent\n"))
    await asyncio.wait_for(box.drain(), 10)
    assert [e["text"] for e in serve.taken] == ["kept\n"] and box.lost
