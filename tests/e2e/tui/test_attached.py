"""`t25 tui --url`: the cockpit attached to a real `t25 serve` over loopback HTTP.

Every read and decision crosses REST, events arrive over SSE, and the control plane's
own factory (its store, its audit) is what changes.
"""

from __future__ import annotations

import asyncio
import time

import pytest

from core.domain.events import Resync, RunOutput
from core.domain.models import RunStatus, TaskState
from core.errors import ConfigError, ControlPlaneUnreachable
from t25_tui.api.cockpit_client import attach
from t25_tui.api.server import make_api
from t25_tui.tui.screens.detail import TaskDetailScreen
from t25_tui.tui.screens.dialogs import ApprovalDialog, MessageDialog
from t25_tui.tui.screens.panes import AuditPane, CostPane, ProfilesPane
from t25_tui.tui.widgets.logpane import LogPane
from tests.support.cockpit import TOKEN, card_state, remote_app, settle_board, until, until_async
from tests.support.serving import serving
from tests.support.waiting import free_port


@pytest.fixture
async def served(seeded):
    api = make_api(seeded.control, worker_credential=None, operator_token=TOKEN)
    async with serving(api) as url:
        yield seeded, url


async def test_the_attached_cockpit_decides_on_the_control_plane(served):
    seeded, url = served
    local = seeded.control
    async with attach(url, TOKEN) as remote:
        app = remote_app(seeded, remote)
        async with app.run_test(size=(120, 36)) as pilot:
            await settle_board(app, pilot)
            status = str(app.query_one("#status").render())
            assert f"attached to {url}" in status and "waiting" in status
            assert {c.task.id for c in app.cards} == {t.id for t in await local.store.list_tasks()}

            assert app.board.focus_task("T-2")
            await pilot.press("a")  # the plan is read from the control plane's artifacts
            await until(pilot, lambda: isinstance(app.screen, ApprovalDialog))
            assert "HIGH" in str(app.screen.query_one("#plan").render())
            await pilot.press("a")
            await until_async(pilot, lambda: _state_is(local, "T-2", TaskState.IMPLEMENTING))
            await until(pilot, lambda: card_state(app, "T-2") is TaskState.IMPLEMENTING)

            assert app.board.focus_task("T-1")  # DONE: a retry is refused, with the reason
            await pilot.press("r", "enter", "enter")
            await until(pilot, lambda: isinstance(app.screen, MessageDialog))
            body = str(app.screen.query_one("#message-body").render())
            assert "only a FAILED task can be retried" in body
            await pilot.press("escape")

            await pilot.press("u")  # the audit, read and verified on the control plane
            await until(pilot, lambda: isinstance(app.screen, AuditPane) and app.screen.ready)
            assert "chain verified" in str(app.screen.query_one("#audit-status").render())
            await pilot.press("c")
            await until(pilot, lambda: isinstance(app.screen, CostPane) and app.screen.ready)
            assert "$" in str(app.screen.query_one("#cost-summary").render())
            await pilot.press("p")  # roles and policies; the binaries are the workers' business
            await until(pilot, lambda: isinstance(app.screen, ProfilesPane) and app.screen.ready)
            table = app.screen.query_one("#profiles-table")
            assert "(on the worker hosts)" in {str(c) for c in table.get_row_at(0)}
    approve = local.audit.entries(task="T-2")[-1]
    # The actor is the token's name; what the cockpit claims is kept beside it.
    assert (approve.decision, approve.actor) == ("approve", "operator (claimed ana@remote)")


async def test_changes_and_agent_output_arrive_live_over_sse(served):
    seeded, url = served
    local = seeded.control
    run = [r for r in await local.store.list_runs(task_id="T-3") if r.status is RunStatus.RUNNING][
        -1
    ]
    async with attach(url, TOKEN) as remote:
        app = remote_app(seeded, remote)
        async with app.run_test(size=(120, 36), notifications=True) as pilot:
            await settle_board(app, pilot)
            await local.cancel("T-9", actor="someone-else", reason="not now")
            await until(pilot, lambda: card_state(app, "T-9") is TaskState.CANCELLED)

            assert app.board.focus_task("T-3")
            await pilot.press("w")  # the log (l moves between lanes on the board)
            await until(
                pilot,
                lambda: (
                    isinstance(app.screen, TaskDetailScreen)
                    and app.screen.query_one(LogPane).replayed
                ),
            )
            pane = app.screen.query_one(LogPane)
            assert any("hunk 8" in line for line in pane.output.lines)  # history, over REST
            for i in range(50):
                await local.record(
                    RunOutput(
                        task_id="T-3",
                        run_id=run.id,
                        stream="stdout",
                        text=f"reviewer: finding {i}\n",
                    )
                )
            await until(
                pilot,
                lambda: [line for line in pane.output.lines if line][-1] == "reviewer: finding 49",
            )
            shown = [line for line in pane.output.lines if line.startswith("reviewer: finding")]
            assert shown == [f"reviewer: finding {i}" for i in range(50)]  # no gap, no repeat


async def test_a_dropped_link_resumes_with_nothing_missed_and_nothing_twice(seeded):
    """serve stops (its SSE streams end with it); work goes on in the store; a serve comes
    back on the same address and the cockpit's stream resumes from its last event id."""
    local = seeded.control
    run = [r for r in await local.store.list_runs(task_id="T-3") if r.status is RunStatus.RUNNING][
        -1
    ]
    port = free_port()
    first = serving(make_api(local, worker_credential=None, operator_token=TOKEN), port)
    url = await first.__aenter__()
    async with attach(url, TOKEN) as remote:
        start = remote.cursor
        seen = remote.bus.subscribe()
        await _until(lambda: remote.connected)
        await local.cancel("T-9", actor="ops", reason="before the drop")
        before = await local.store.last_event_id()
        await _until(lambda: remote.cursor == before)

        await first.__aexit__(None, None, None)
        await _until(lambda: not remote.connected)
        assert remote.link() == f"reconnecting to {url}…"
        for i in range(30):  # what another process does meanwhile, on the same store
            await local.record(
                RunOutput(task_id="T-3", run_id=run.id, stream="stdout", text=f"while away {i}\n")
            )
        await local.cancel("T-8", actor="ops", reason="during the drop")
        newest = await local.store.last_event_id()

        async with serving(make_api(local, worker_credential=None, operator_token=TOKEN), port):
            await _until(lambda: remote.cursor == newest, within_s=30)
            assert remote.link() == f"attached to {url}"
    items = []
    while (item := seen.get_nowait()) is not None:
        items.append(item)
    ids = [e.id for e in items if not isinstance(e, Resync)]
    assert ids == [e.id for e in await local.store.events_after(start, limit=10_000)]
    back = next(i for i, e in enumerate(items) if isinstance(e, RunOutput))
    assert isinstance(items[back - 1], Resync)  # the link came back: the board re-reads first


async def test_attaching_refuses_clearly(served):
    _, url = served
    with pytest.raises(ConfigError) as refused:
        async with attach(url, "not-the-token"):
            pass
    assert "refused this cockpit" in refused.value.message
    assert "T25_OPERATOR_TOKEN" in refused.value.hint
    with pytest.raises(ControlPlaneUnreachable) as unreachable:
        async with attach(f"http://127.0.0.1:{free_port()}", TOKEN):
            pass
    assert "is `t25 serve` running there" in unreachable.value.hint


def test_t25_tui_url_needs_no_local_config_and_says_what_is_wrong(t25, tmp_path):
    port = free_port()
    result = t25("tui", "--url", f"http://127.0.0.1:{port}", cwd=tmp_path)
    assert result.code == 1
    assert f"t25: error: http://127.0.0.1:{port}/config:" in result.err
    assert "hint: is `t25 serve` running there" in result.err
    mixed = t25("tui", "--url", f"http://127.0.0.1:{port}", "--serve", cwd=tmp_path)
    assert mixed.code == 1 and "--serve, --workers and --no-workers" in mixed.err


async def _state_is(control, ref, state) -> bool:
    return (await control.task(ref)).state is state


async def _until(condition, within_s: float = 10.0) -> None:
    deadline = time.monotonic() + within_s
    while not condition():
        if time.monotonic() > deadline:
            raise AssertionError("condition not met in time")
        await asyncio.sleep(0.02)


async def test_keepalive_pings_after_an_event_do_not_drop_the_link(served, monkeypatch):
    """serve pings an idle stream; a ping carries no data (and the last id): it is neither an
    event to decode nor a broken link."""
    import fastapi.routing

    monkeypatch.setattr(fastapi.routing, "_PING_INTERVAL", 0.05)
    seeded, url = served
    async with attach(url, TOKEN) as remote:
        sub = remote.bus.subscribe()
        for _ in range(500):
            if remote.connected:
                break
            await asyncio.sleep(0.02)
        await seeded.control.cancel("T-9", actor="someone-else", reason="not now")
        for _ in range(500):
            seen = list(iter(sub.get_nowait, None))
            if any(getattr(item, "kind", "") == "decision_recorded" for item in seen):
                break
            await asyncio.sleep(0.02)
        else:
            raise AssertionError("the cancel never arrived over the event stream")
        # not a wait: an idle stream for twenty pings' worth of time, during which nothing may
        # break the link; on a loaded machine fewer pings come, so it can only pass more easily.
        await asyncio.sleep(1.0)
        assert remote.connected
        assert not any(isinstance(item, Resync) for item in iter(sub.get_nowait, None))
