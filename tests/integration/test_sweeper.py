"""The sweeper and its in-process workers (`t25 run`, `t25 serve`, the cockpit): a pass leaves no asyncio
task behind, and a store that goes away is a pause, said once, not the end of the sweeper.

Postgres outages use the session's throwaway cluster (tests/support/pg_cluster.py), stopped and
started for real; the pipeline runs the scripted agent, as in tests/integration/test_pipeline.py.
"""

from __future__ import annotations

import asyncio
import gc
import logging
import uuid
from datetime import UTC, datetime, timedelta

import pytest

from adapters.base import CliAdapter
from adapters.checks import run_check
from adapters.scripted import ScriptedSpec
from core.config.schema import DATABASE_URL_ENV
from core.control.sweeper import Sweeper
from core.domain.models import RunOutcome, RunStatus, TaskState
from core.errors import StoreError, StoreUnavailable
from t25_tui.runtime import local_workers
from tests.support.pipeline import Env, write_config
from tests.support.waiting import until

S = TaskState


class CountedSweeper(Sweeper):
    """The real sweeper, counting its sweep passes (tried and finished) for the tests to wait on."""

    tried = finished = 0

    async def sweep(self) -> None:
        self.tried += 1
        await super().sweep()
        self.finished += 1


def sweeper_of(env: Env, **kw) -> CountedSweeper:
    kw.setdefault("heartbeat_s", 0.2)
    sweeping = {k: kw.pop(k) for k in ("sweep_s", "store_patience_s") if k in kw}
    pool = local_workers(
        env.control,
        {"scripted": CliAdapter(ScriptedSpec())},
        run_check,
        count=kw.pop("workers", None),
        **kw,
    )
    return CountedSweeper(env.control, pool, **sweeping)


@pytest.fixture
async def env(shop):
    e = Env(shop)
    yield e
    await e.close()


@pytest.mark.parametrize("workers", [0, 2])
async def test_sweep_passes_leave_no_task_behind(env, workers):
    """Each pass used to shield a fresh task that outlived it: with workers it stayed (and
    grew the heap for ever); without, it was destroyed while pending, with a warning."""
    await env.open()
    sweeper = sweeper_of(env, workers=workers, sweep_s=0.001)
    loop = asyncio.get_running_loop()
    reported: list[str] = []
    loop.set_exception_handler(lambda _, context: reported.append(context["message"]))
    working = asyncio.create_task(sweeper.work(follow=True))
    gc.disable()  # a leaked task stays countable until the end
    try:
        await until(lambda: sweeper.finished >= 5, what="5 passes")
        before = len(asyncio.all_tasks())
        start = sweeper.finished
        await until(lambda: sweeper.finished >= start + 300, what="300 more passes")
        after = len(asyncio.all_tasks())
    finally:
        gc.enable()
        working.cancel()
        await asyncio.gather(working, return_exceptions=True)
        gc.collect()
        loop.set_exception_handler(None)
    assert after - before < 5, f"{after - before} tasks more after 300 passes"
    assert not [m for m in reported if "destroyed but it is pending" in m]


@pytest.mark.postgres
async def test_the_sweeper_rides_out_a_postgres_outage_and_says_so_once(
    env, cluster, monkeypatch, caplog
):
    """`t25 run --follow` and the cockpit: workers and sweep pause while Postgres is down,
    and the work goes on once it is back. One line when it goes, one when it is back."""
    monkeypatch.setenv(DATABASE_URL_ENV, cluster.new_database(f"t25_{uuid.uuid4().hex[:12]}"))
    control = await env.open()
    sweeper = sweeper_of(env, workers=2, lease_ttl_s=3.0)
    caplog.set_level(logging.WARNING, logger="t25.sweeper")
    working = asyncio.create_task(sweeper.work(follow=True))
    try:
        first = await env.new("Before the outage")

        async def state_of(ref: str) -> TaskState:
            return (await control.store.get_task(ref)).state

        await until(lambda: _is(state_of(first.id), S.DONE), timeout=120, what="T-1 done")
        cluster.stop()
        await until(lambda: _said(caplog, "the store is unavailable"), what="the outage said")
        tried = sweeper.tried
        await until(lambda: sweeper.tried >= tried + 2, what="two retries")  # 0.5 s, then 1 s
        assert not working.done()
        cluster.start()
        await until(lambda: _said(caplog, "answers again"), what="the recovery said")
        second = await env.new("After the outage")
        await until(lambda: _is(state_of(second.id), S.DONE), timeout=120, what="T-2 done")
    finally:
        working.cancel()
        await asyncio.gather(working, return_exceptions=True)
    said = [r.getMessage() for r in caplog.records if r.name == "t25.sweeper"]
    assert len(said) == 2, said
    assert "the store is unavailable (cannot reach the Postgres store" in said[0]
    assert "the store answers again after" in said[1]


@pytest.mark.postgres
async def test_the_sweeper_gives_up_when_the_store_stays_away_past_its_patience(
    env, cluster, monkeypatch
):
    monkeypatch.setenv(DATABASE_URL_ENV, cluster.new_database(f"t25_{uuid.uuid4().hex[:12]}"))
    await env.open()
    sweeper = sweeper_of(env, workers=1, store_patience_s=1.0)
    working = asyncio.create_task(sweeper.work(follow=True))
    await until(lambda: sweeper.finished >= 1, what="a first pass")
    cluster.stop()
    with pytest.raises(
        StoreError,
        match=r"the store has been unavailable for over 1 s "
        r"\(cannot reach the Postgres store",
    ) as e:
        await asyncio.wait_for(working, 60)
    assert not isinstance(e.value, StoreUnavailable)  # the sweeper is over, not paused
    assert "--store-patience" in e.value.hint


async def _is(state, wanted: TaskState) -> bool:
    try:
        return await state is wanted
    except StoreUnavailable:
        return False


def _said(caplog, text: str) -> bool:
    return any(text in r.getMessage() for r in caplog.records if r.name == "t25.sweeper")


@pytest.mark.postgres
def test_t25_run_ends_with_a_clear_error_when_the_store_is_gone_at_start(
    shop, t25, cluster, monkeypatch
):
    url = cluster.new_database(f"t25_{uuid.uuid4().hex[:12]}")
    write_config(shop)
    cluster.stop()
    done = t25("run", cwd=shop, env={DATABASE_URL_ENV: url})
    assert done.code == 1
    assert done.err.startswith("t25: error: cannot reach the Postgres store at "), done.err
    assert "hint: check that Postgres is running" in done.err
    assert "Traceback" not in done.err


@pytest.mark.postgres
async def test_a_control_plane_whose_clock_runs_ahead_takes_no_decision_in_progress_for_a_stall(
    env, cluster, monkeypatch
):
    """Run times are the database's clock; a process whose own clock is two minutes ahead
    (serve's, say) must not take a run that finished a moment ago, its decision still
    being made, for a stall, and run its stage again. Stall checks read the store's clock."""
    monkeypatch.setenv(DATABASE_URL_ENV, cluster.new_database(f"t25_{uuid.uuid4().hex[:12]}"))
    control = await env.open()
    control.clock = lambda: datetime.now(UTC) + timedelta(seconds=120)
    task = await env.new()
    sweeper = Sweeper(control)  # no workers: the test plays the worker
    await sweeper.sweep()  # RECEIVED -> SPEC, and its run
    lease = await control.store.claim_run("w", 30)
    assert lease is not None
    await control.store.complete_run(lease, RunOutcome(status=RunStatus.SUCCEEDED))
    # The run finished; the completion deciding on it has not moved the task yet.
    for _ in range(3):
        await sweeper.sweep()
    runs = await control.store.list_runs(task_id=task.id)
    assert [(r.stage, r.status) for r in runs] == [(S.SPEC, RunStatus.SUCCEEDED)]


class RowsRead:
    """The control plane as the sweeper sees it, counting the tasks and runs its store reads
    hand back."""

    def __init__(self, control) -> None:
        self._control = control
        self.rows = 0
        counter = self

        class CountingStore:
            def __getattr__(self, name: str):
                found = getattr(control.store, name)
                if not name.startswith(("list_", "get_")):
                    return found

                async def read(*args, **kw):
                    answer = await found(*args, **kw)
                    counter.rows += len(answer) if isinstance(answer, list) else 1
                    return answer

                return read

        self.store = CountingStore()

    def __getattr__(self, name: str):
        return getattr(self._control, name)


async def test_a_sweep_reads_only_the_tasks_that_can_move_however_long_the_queue(env):
    """Every 0.5 s, whatever the queue's length: a pass used to read every queued and
    running run, and every working task, to find the few with nothing queued."""
    control = await env.open()
    for n in range(40):
        await control.new_task(f"task {n}", actor="ana")
    seen = RowsRead(control)
    sweeper = Sweeper(seen)  # no workers: nothing claims the runs
    await sweeper.sweep()  # each task to SPEC, with its run queued
    assert seen.rows >= 40
    assert len(await control.store.list_runs(status=RunStatus.QUEUED)) == 40

    seen.rows = 0
    await sweeper.sweep()
    assert not await sweeper.idle()
    assert seen.rows == 0


class VersionCounted(CliAdapter):
    """The scripted agent, counting the `--version` processes it starts."""

    def __init__(self) -> None:
        super().__init__(ScriptedSpec())
        self.probes = 0

    async def _read_version(self) -> str | None:
        self.probes += 1
        return await super()._read_version()


async def test_a_pool_reads_the_versions_of_the_clis_its_roles_name_as_it_starts(env):
    """Before any run needs it, not in front of the first; once, a run's announcement
    using it; and no `--version` of a CLI no role names."""
    control = await env.open()
    named, unnamed = VersionCounted(), VersionCounted()
    pool = local_workers(control, {"scripted": named, "other": unnamed}, run_check, count=1)
    working = asyncio.create_task(Sweeper(control, pool).work(follow=True))
    try:
        await until(lambda: named.probes == 1, what="the version read with no task queued")
        await control.new_task("add a greeting", actor="ana")

        async def started() -> bool:
            return any(e.kind == "run_started" for e in await control.store.events_after(0))

        await until(started, what="a run announced")
    finally:
        working.cancel()
        await asyncio.gather(working, return_exceptions=True)

    assert (named.probes, unnamed.probes) == (1, 0)


class GatedVersion(VersionCounted):
    """The scripted agent whose `--version` answers once `gate` opens, counting who asked."""

    def __init__(self) -> None:
        super().__init__()
        self.gate = asyncio.Event()
        self.asked = 0

    async def version(self) -> str | None:
        self.asked += 1
        return await super().version()

    async def _read_version(self) -> str | None:
        await self.gate.wait()
        return await super()._read_version()


async def test_a_pool_stopped_while_a_run_waits_for_the_version_lets_the_run_finish(env):
    """The pool stops waiting for the version it asked for, but the reading goes on for the
    run that waits for it too (it is shielded from each asker): that run finishes, as every
    run does when its pool stops."""
    control = await env.open()
    adapter = GatedVersion()
    pool = local_workers(control, {"scripted": adapter}, run_check, count=1)
    sweeper = Sweeper(control, pool)
    task = await control.new_task("add a greeting", actor="ana")
    await sweeper.sweep()  # to SPEC, its run queued
    pool.start(sweeper.store)
    await until(lambda: adapter.asked == 2, what="the run announcing, waiting for the version")

    stopping = asyncio.create_task(pool.stop())
    adapter.gate.set()
    await asyncio.wait_for(stopping, 120)

    spec = (await control.store.list_runs(task_id=task.id))[0]
    assert spec.status is RunStatus.SUCCEEDED, spec
