"""One way in: the control plane every face holds (`core.ports.Operations`), local or over REST.

The local control plane and the remote cockpit's REST client implement the same port; one
query service answers the task detail for `t25 task show`, `GET /tasks/{id}` and the
cockpit; a decision is a value, written in one store transaction after its audit line, and
it runs to its end even when whoever asked for it goes away.
"""

from __future__ import annotations

import asyncio
import inspect
import os
import subprocess
import sys
from datetime import UTC, datetime, timedelta

import pytest

from core.config.schema import load_config
from core.control.service import ControlPlane
from core.domain.decisions import Decision
from core.domain.events import DecisionRecorded, RunOutput, TaskTransitioned
from core.domain.models import TaskState
from core.domain.network import NETWORK_STREAM, Connection
from core.domain.verbs import Verb
from core.errors import PolicyRefused, StoreError
from core.ports import Operations
from store import open_store
from t25_tui.api.cockpit_client import RemoteControlPlane, attach
from t25_tui.api.credentials import local_token
from t25_tui.api.server import make_api
from t25_tui.runtime import open_runtime
from tests.support import CHECKOUT
from tests.support.backends import PG_DSN
from tests.support.pipeline import Env, write_config
from tests.support.serving import serving
from tests.support.waiting import until

S = TaskState


def _operations() -> list[str]:
    return sorted(
        name
        for name, member in inspect.getmembers(Operations)
        if not name.startswith("_") and inspect.iscoroutinefunction(member)
    )


def test_the_local_and_the_remote_control_plane_are_one_port():
    assert {"detail", "decide", "tasks", "audit_trail", "new_task"} <= set(_operations())
    for implementation in (ControlPlane, RemoteControlPlane):
        assert Operations in implementation.__mro__  # declared: mypy checks each method
        for name in _operations():
            theirs = inspect.signature(getattr(implementation, name))
            ours = inspect.signature(getattr(Operations, name))
            assert list(theirs.parameters) == list(ours.parameters), (implementation, name)
            assert inspect.iscoroutinefunction(getattr(implementation, name)), name


async def test_a_tasks_detail_reads_no_agent_output_but_the_network_records(seeded):
    """`t25 task show` on a task whose agents printed thousands of lines reads none of them:
    its history, questions and network records each come by kind (migration 0018)."""
    local = seeded.control
    for n in range(300):
        await local.store.append_event(RunOutput(task_id="T-2", stream="stdout", text=f"{n}"))
    record = Connection("api.example.com", 443, True, "allowed", "connect", 10, 20).to_text()
    await local.store.append_event(RunOutput(task_id="T-2", stream=NETWORK_STREAM, text=record))
    before = await local.detail("T-2")
    read: list[dict] = []
    events_after = local.store.events_after

    async def counted(after_id, **kw):
        found = await events_after(after_id, **kw)
        read.append({**kw, "found": len(found)})
        return found

    local.store.events_after = counted  # type: ignore[method-assign]
    try:
        shown = await local.detail("T-2")
    finally:
        local.store.events_after = events_after  # type: ignore[method-assign]
    assert shown == before
    assert all(r.get("kind") for r in read), read  # never every event of the task
    outputs = [r for r in read if r["kind"] == RunOutput.kind]
    assert outputs and all(r.get("stream") == NETWORK_STREAM for r in outputs), read
    assert sum(r["found"] for r in read) < 50  # not the 300 lines of output
    assert [row.host for row in shown.network] == ["api.example.com"]


async def test_one_detail_for_the_command_line_rest_and_the_cockpit(seeded):
    local = seeded.control
    mine = await local.detail("T-2")
    assert [type(e) for e in mine.history].count(DecisionRecorded) == 1  # the rejection
    assert mine.cost.total_usd == sum(r.cost_usd for r in mine.runs) > 0
    async with (
        serving(make_api(local, worker_credential=None, operator_token=None)) as url,
        attach(url, local_token(local.config.root)) as remote,
    ):
        assert await remote.detail("t2") == mine
        asked = await remote.detail("T-4")
        assert asked.question == "Invoice in EUR, or in the customer's currency?"

    shown = await asyncio.to_thread(
        subprocess.run,
        [sys.executable, "-m", "t25_tui", "task", "show", "T-2"],
        cwd=seeded.repo,
        env=os.environ,
        capture_output=True,
        text=True,
        timeout=120,
        check=True,
    )
    shown = shown.stdout
    moves = [e for e in mine.history if isinstance(e, TaskTransitioned)]
    for move in moves:
        assert f"{move.at:%Y-%m-%d %H:%M:%S}  {move.from_state} → {move.to_state}" in shown
    assert f"cost     ${mine.cost.total_usd:.4f}" in shown


def started(task: asyncio.Task) -> bool:
    """Whether `task` has taken its first step (is suspended at an await, or done)."""
    return task.done() or inspect.getcoroutinestate(task.get_coro()) != inspect.CORO_CREATED


async def test_a_decision_runs_to_its_end_when_its_caller_is_cancelled(shop):
    env = Env(shop)
    control = await env.open()
    try:
        await control.new_task("Drop the CSV export", actor="ana")
        async with control.audit.writer():  # another decider holds the log
            caller = asyncio.create_task(
                control.decide(Decision(verb=Verb.CANCEL, task="T-1", actor="ana", text="no"))
            )
            # the caller has taken its first step: the decision is under way, waiting for the log
            await until(lambda: started(caller), 10, "the decision under way")
            caller.cancel()
            with pytest.raises(asyncio.CancelledError):
                await caller

        async def cancelled() -> bool:
            return (await control.task("T-1")).state is S.CANCELLED

        await until(cancelled, 10, "T-1 CANCELLED once the log is free")  # the decision goes on
        (line,) = control.audit.entries(task="T-1")
        assert (line.decision, line.reason) == ("cancel", "no")
        assert (await control.audit.verify()).ok
    finally:
        await env.close()


async def _awaiting_approval(control: ControlPlane):
    """A task with a plan, waiting for a human: the real pipeline's way there."""
    from core.domain.models import ArtifactKind, ArtifactMeta

    task = await control.new_task("Rotate the key", actor="ana")
    for stage in (S.SPEC, S.PLAN):
        task = await control.transition(task, stage, actor="t25")
    await control.store.put_artifact(
        b'{"steps": ["x"], "files": [], "risk": "high", "rationale": "y"}',
        ArtifactMeta(kind=ArtifactKind.PLAN, media_type="application/json", task_id=task.id),
    )
    return await control.transition(task, S.AWAITING_APPROVAL, actor="t25")


async def test_one_decision_is_one_store_transaction_after_one_fsync(shop, monkeypatch):
    """Counted on the real SQLite store (its statements, traced) and the real audit file
    (each fsync, counted on its way to the kernel)."""
    env = Env(shop)
    control = await env.open()
    try:
        task = await _awaiting_approval(control)
        await control.cancel((await control.new_task("warm", actor="ana")).id, actor="ana")
        statements: list[str] = []
        await control.store._db.set_trace_callback(statements.append)  # type: ignore[attr-defined]
        real_fsync, fsyncs = os.fsync, []

        def fsync(fd: int) -> None:
            fsyncs.append(fd)
            real_fsync(fd)

        monkeypatch.setattr(os, "fsync", fsync)
        await control.approve(task.id, actor="ana")
        monkeypatch.undo()
        await control.store._db.set_trace_callback(None)  # type: ignore[attr-defined]
        writes = [s for s in statements if s.strip().upper().startswith("BEGIN IMMEDIATE")]
        assert (len(writes), len(fsyncs)) == (1, 1), statements
        assert (await control.task(task.id)).state is S.IMPLEMENTING
        assert len(await control.runs(task=task.id)) == 1  # its next run, queued with it
        assert (await control.audit.verify()).ok
    finally:
        await env.close()


async def test_an_approval_bound_to_a_plan_that_changed_is_refused(shop):
    env = Env(shop)
    control = await env.open()
    try:
        task = await _awaiting_approval(control)
        stale = Decision(
            verb=Verb.APPROVE, task=task.id, actor="ana", bound_to="sha256:" + "0" * 64
        )
        with pytest.raises(PolicyRefused, match="changed since it was shown"):
            await control.decide(stale)
        assert control.audit.entries() == []  # refused before anything was written
        (plan,) = await control.artifacts(task=task.id)
        bound = stale.model_copy(update={"bound_to": f"sha256:{plan.sha256}"})
        assert (await control.decide(bound)).state is S.IMPLEMENTING
        assert control.audit.entries()[-1].bound_to == f"sha256:{plan.sha256}"
    finally:
        await env.close()


async def test_time_comes_from_the_clock_the_runtime_is_given(shop):
    write_config(shop)
    at = datetime(2030, 1, 2, 3, 4, 5, tzinfo=UTC)
    async with open_runtime(load_config(shop / "t25.yaml"), clock=lambda: at) as runtime:
        control = runtime.control
        task = await control.new_task("Stamped", actor="ana")
        task = await control.enter(task, S.SPEC, actor="t25")
        await control.cancel(task.id, actor="ana", reason="not now")
        detail = await control.detail(task.id)
        assert {task.created_at, task.state_since} == {at}
        assert {e.at for e in await control.events(task.id)} == {at}
        assert [r.enqueued_at for r in detail.runs] == [at]
        assert [r.finished_at for r in detail.runs] == [at]  # cancelled with the task
        assert [e.ts for e in control.audit.entries()] == [at]
    async with open_runtime(load_config(shop / "t25.yaml")) as runtime:  # the machine's clock
        later = await runtime.control.new_task("Now", actor="ana")
        assert abs(later.created_at - datetime.now(UTC)) < timedelta(minutes=5)


async def test_a_postgres_store_keeps_its_servers_clock():
    with pytest.raises(StoreError, match="keeps its server's clock"):
        await open_store(PG_DSN, clock=lambda: datetime(2030, 1, 1, tzinfo=UTC))


def test_no_face_finds_a_decision_by_name():
    """Every face builds a Decision; none looks a method up by the verb's name."""

    root = CHECKOUT
    faces = [*root.glob("t25_tui/**/*.py"), root / "tests/support/decider.py"]
    for path in faces:
        assert "getattr(control" not in path.read_text(), path
        assert "getattr(self.control" not in path.read_text(), path
