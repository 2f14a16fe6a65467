"""`t25 serve`'s API in this process, on a real uvicorn server on loopback."""

from __future__ import annotations

import asyncio
from contextlib import asynccontextmanager

from t25_tui.api.protocol import HEADER as PROTOCOL_HEADER
from t25_tui.api.protocol import PROTOCOL
from t25_tui.api.server import server_for

CREDENTIAL = "worker-secret-42"


@asynccontextmanager
async def serving(api, port: int = 0):
    server = server_for(api, "127.0.0.1", port, handle_signals=False)
    task = asyncio.create_task(server.serve())
    while not server.started:  # noqa: ASYNC110 - uvicorn sets a flag, not an event
        await asyncio.sleep(0.01)
    port = server.servers[0].sockets[0].getsockname()[1]
    try:
        yield f"http://127.0.0.1:{port}"
    finally:
        server.should_exit = True
        await task


WORKER = {"Authorization": f"Bearer {CREDENTIAL}", PROTOCOL_HEADER: str(PROTOCOL)}
