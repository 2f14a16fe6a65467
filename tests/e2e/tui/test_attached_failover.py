"""`t25 tui --url A --url B`: the attached cockpit on two serve replicas of one store, the
first of which goes away. The cockpit moves to the second at once, its event stream
resumes there from the last id it was given, and the board keeps moving."""

from __future__ import annotations

from core.domain.events import Resync
from core.domain.models import TaskState
from t25_tui.api.cockpit_client import attach
from t25_tui.api.server import make_api
from tests.support.cockpit import TOKEN, card_state, remote_app, settle_board, until
from tests.support.serving import serving
from tests.support.waiting import free_port


async def test_the_cockpit_moves_to_the_next_replica_and_keeps_updating(seeded):
    local = seeded.control

    def replica():  # a serve on the same store: its API, its event stream
        return make_api(local, worker_credential=None, operator_token=TOKEN)

    first = serving(replica())
    a = await first.__aenter__()
    async with serving(replica()) as b, attach([a, b], TOKEN) as remote:
        start = remote.cursor
        seen = remote.bus.subscribe()
        app = remote_app(seeded, remote)
        async with app.run_test(size=(120, 36)) as pilot:
            await settle_board(app, pilot)

            def status() -> str:
                return str(app.query_one("#status").render())

            await until(pilot, lambda: f"attached to {a}" in status())
            await local.cancel("T-9", actor="ops", reason="before A goes")
            await until(pilot, lambda: card_state(app, "T-9") is TaskState.CANCELLED)

            await first.__aexit__(None, None, None)  # replica A stops: its streams end
            await local.cancel("T-8", actor="ops", reason="after A went")
            await until(pilot, lambda: card_state(app, "T-8") is TaskState.CANCELLED)
            await until(pilot, lambda: f"attached to {b}" in status())
            assert remote.http.url == b
            newest = await local.store.last_event_id()
            await until(pilot, lambda: remote.cursor == newest)
            assert [t.id for t in await remote.tasks(states=[TaskState.CANCELLED])] == [
                t.id for t in await local.tasks(states=[TaskState.CANCELLED])
            ]  # a read goes to B as well
    items = list(iter(seen.get_nowait, None))
    ids = [e.id for e in items if not isinstance(e, Resync)]
    assert ids == [e.id for e in await local.store.events_after(start, limit=10_000)]


def test_t25_tui_with_no_replica_answering_says_so_naming_the_last_tried(t25, tmp_path):
    a, b = (f"http://127.0.0.1:{free_port()}" for _ in range(2))
    result = t25("tui", "--url", a, "--url", b, cwd=tmp_path)
    assert result.code == 1
    assert f"t25: error: {b}/config:" in result.err
    assert "hint: is `t25 serve` running there" in result.err
