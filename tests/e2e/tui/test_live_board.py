"""The board keeps moving after the operator acts in it, whoever changes the store next.

Each test acts in the real cockpit first (a new task through the dialog, an approval),
then another process changes the store — a second store opened on the same file, or
another client of the same `t25 serve` — and waits, bounded, for the board to show it.
"""

from __future__ import annotations

import asyncio
import os
import subprocess
import time

import httpx
import pytest
from textual.widgets import DataTable
from textual.worker import WorkerState

from core.control.service import ControlPlane
from core.domain.events import TaskUpdated
from core.domain.models import TaskState
from store import open_store
from t25_tui.api.cockpit_client import attach
from t25_tui.tui.app import make_app
from t25_tui.tui.screens.dialogs import ApprovalDialog
from t25_tui.tui.screens.inbox import Inbox
from t25_tui.tui.screens.new_task import NewTaskDialog
from tests.support.cockpit import app_for, settle_board, until
from tests.support.terminal import T25
from tests.support.waiting import answers, free_port

TOKEN = "operator-secret-14"


def _card_state(app, tid):
    return next((c.task.state for c in app.cards if c.task.id == tid), None)


@pytest.fixture
async def other_process(seeded):
    """Another T25 on the same SQLite file: its own store and bus, as `t25 approve` has."""
    config = seeded.control.config
    other = ControlPlane(config, await open_store(config.store_url))
    yield other
    await other.store.close()


async def test_the_board_moves_after_a_new_task_is_filed(seeded, other_process):
    app = app_for(seeded)
    async with app.run_test(size=(120, 36)) as pilot:
        await settle_board(app, pilot)
        await pilot.press("n")
        await until(pilot, lambda: isinstance(app.screen, NewTaskDialog))
        await pilot.press(*"Log slow queries", "enter")
        await until(pilot, lambda: any(c.task.title == "Log slow queries" for c in app.cards))

        await other_process.cancel("T-9", actor="someone-else", reason="from another shell")
        await until(pilot, lambda: _card_state(app, "T-9") is TaskState.CANCELLED)
        await other_process.new_task("Filed from another shell", actor="someone-else")
        await until(
            pilot, lambda: any(c.task.title == "Filed from another shell" for c in app.cards)
        )


async def test_cancelled_board_reads_leave_no_refresh_behind(seeded, other_process):
    app = app_for(seeded)
    async with app.run_test(size=(120, 36)) as pilot:
        await settle_board(app, pilot)
        app.refresh_board()
        app.workers.cancel_group(app, "board")  # cancelled before it ran a line
        running = app.refresh_board()
        await until(pilot, lambda: app._board_reads or running.is_finished)
        app.workers.cancel_group(app, "board")  # cancelled mid-read
        await other_process.cancel("T-9", actor="someone-else", reason="from another shell")
        await until(pilot, lambda: _card_state(app, "T-9") is TaskState.CANCELLED)


@pytest.fixture
def t25_serve(seeded):
    """A real `t25 serve` process over the seeded repository's store."""
    url = f"http://127.0.0.1:{free_port()}"
    env = {**os.environ, "T25_OPERATOR_TOKEN": TOKEN}
    serve = subprocess.Popen(
        [str(T25), "serve", "--bind", url.removeprefix("http://")],
        cwd=seeded.repo,
        env=env,
        stdin=subprocess.DEVNULL,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
    )
    try:
        deadline = time.monotonic() + 30
        while not answers(url):
            assert serve.poll() is None, serve.stderr.read().decode()
            assert time.monotonic() < deadline, "t25 serve never answered /health"
            time.sleep(0.1)
        yield url
    finally:
        serve.terminate()
        try:
            serve.wait(timeout=20)
        except subprocess.TimeoutExpired:
            serve.kill()
            serve.wait()
        serve.stderr.close()


async def test_the_attached_board_moves_after_an_approval(seeded, t25_serve):
    async with (
        attach(t25_serve, TOKEN) as remote,
        httpx.AsyncClient(
            base_url=t25_serve, timeout=10, headers={"Authorization": f"Bearer {TOKEN}"}
        ) as other_client,
    ):
        app = make_app(remote, clock=seeded.clock, actor="ana@remote", link=remote.link)
        async with app.run_test(size=(120, 36)) as pilot:
            await settle_board(app, pilot)
            assert app.board.focus_task("T-2")
            await pilot.press("a")
            await until(pilot, lambda: isinstance(app.screen, ApprovalDialog))
            await pilot.press("a")
            await until(pilot, lambda: _card_state(app, "T-2") is TaskState.IMPLEMENTING)
            # More decisions: whether a decision's answer or its event reaches the cockpit
            # first is a race, and either order could leave the board frozen.
            assert app.board.focus_task("T-7")
            await pilot.press("x", *"not now", "enter", "enter")
            await until(pilot, lambda: _card_state(app, "T-7") is TaskState.CANCELLED)
            assert app.board.focus_task("T-5")
            await pilot.press("r", "enter", "enter")
            await until(pilot, lambda: _card_state(app, "T-5") is TaskState.IMPLEMENTING)
            await pilot.press("n")
            await until(pilot, lambda: isinstance(app.screen, NewTaskDialog))
            await pilot.press(*"Filed in the attached cockpit", "enter")
            await until(
                pilot,
                lambda: any(c.task.title == "Filed in the attached cockpit" for c in app.cards),
            )

            cancelled = await other_client.post(
                "/tasks/T-9/cancel", json={"actor": "someone-else", "reason": "from another client"}
            )
            assert cancelled.status_code == 200, cancelled.text
            await until(pilot, lambda: _card_state(app, "T-9") is TaskState.CANCELLED)
            made = await other_client.post("/tasks", json={"title": "Filed by another client"})
            assert made.status_code == 201, made.text
            await until(
                pilot, lambda: any(c.task.title == "Filed by another client" for c in app.cards)
            )


async def test_the_board_comes_back_after_its_reads_failed(seeded):
    """serve goes away under an attached cockpit: its board reads fail while the link is
    down. A serve comes back on the same address and the board moves again."""
    from t25_tui.api.server import make_api
    from tests.support.serving import serving

    local, port = seeded.control, free_port()
    first = serving(make_api(local, worker_credential=None, operator_token=TOKEN), port)
    url = await first.__aenter__()
    async with attach(url, TOKEN) as remote:
        app = make_app(remote, clock=seeded.clock, actor="ana@remote", link=remote.link)
        async with app.run_test(size=(120, 36)) as pilot:
            await settle_board(app, pilot)
            await first.__aexit__(None, None, None)
            await until(pilot, lambda: not remote.connected)
            read = app.refresh_board()  # a read with nothing to answer it
            await until(pilot, lambda: read.state is WorkerState.ERROR)
            await local.cancel("T-9", actor="someone-else", reason="while the link was down")
            async with serving(make_api(local, worker_credential=None, operator_token=TOKEN), port):
                await until(
                    pilot, lambda: _card_state(app, "T-9") is TaskState.CANCELLED, within_s=30
                )


async def test_events_arriving_while_the_cockpit_closes_are_let_go(seeded):
    """Events keep arriving (another process deciding, an attached stream) while the cockpit
    closes and its screens are gone: they must not crash the closing app."""
    for _ in range(5):
        app = app_for(seeded)
        stop = asyncio.Event()

        async def flood(stop: asyncio.Event = stop) -> None:
            n = 0
            while not stop.is_set() and n < 100_000:
                n += 1
                seeded.control.bus.publish(
                    TaskUpdated(id=10_000 + n, task_id="T-1", fields={}, actor="elsewhere")
                )
                await asyncio.sleep(0)

        async with app.run_test(size=(120, 36)) as pilot:
            await settle_board(app, pilot)
            flooding = asyncio.create_task(flood())
            await pilot.pause(0.05)  # not a wait: how long the cockpit is flooded
        stop.set()
        await flooding


async def test_the_inbox_drops_a_task_that_stops_waiting_whichever_row_is_selected(seeded):
    app = app_for(seeded)
    async with app.run_test(size=(120, 36)) as pilot:
        await settle_board(app, pilot)
        await pilot.press("i")
        await until(pilot, lambda: isinstance(app.screen, Inbox) and app.screen.ready)
        inbox = app.screen
        table = inbox.query_one(DataTable)
        table.move_cursor(row=table.get_row_index("T-2"))

        def listed() -> set[str | None]:
            return {key.value for key in table.rows}

        assert "T-5" in listed()
        failed = await seeded.control.task("T-5")
        await seeded.control.transition(
            failed, TaskState.IMPLEMENTING, actor="elsewhere", reason="retried by hand"
        )
        await until(pilot, lambda: "T-5" not in listed())
        assert inbox.selected() == "T-2"
