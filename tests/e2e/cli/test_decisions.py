"""Operator decisions through the real `t25` binary (and a real serve): bound to what they
were made on, refused at the door or with what fits instead, and recorded honestly when
they do not take effect."""

from __future__ import annotations

import asyncio
import getpass
import json
from pathlib import Path

import httpx
import pytest
from pydantic import ValidationError

from core.control.service import ControlPlane
from core.domain.decisions import Decision
from core.domain.events import ApprovalRequested, DecisionRecorded, RunQueued
from core.domain.verbs import Verb
from core.errors import InvalidInput
from core.workspace.git import git_sync
from store import open_store
from t25_tui.api.server import make_api
from t25_tui.cli import audit as audit_cli
from t25_tui.cli.main import main
from tests.support.operators import operator_headers
from tests.support.pipeline import PIPELINE_CONFIG, Env
from tests.support.serving import serving


def _lines(repo: Path) -> list[dict]:
    path = repo / ".factory" / "audit.jsonl"
    return (
        [json.loads(line) for line in path.read_bytes().split(b"\n")[:-1]] if path.exists() else []
    )


async def _events(repo: Path, kind: type) -> list:
    store = await open_store(f"sqlite:///{repo / '.factory' / 't25.db'}")
    try:
        return [e for e in await store.events_after(0, limit=100_000) if isinstance(e, kind)]
    finally:
        await store.close()


ME = f"{getpass.getuser()} (Test Operator <operator@t25.invalid>)"  # who runs the binary


async def _task(repo: Path, ref: str):
    store = await open_store(f"sqlite:///{repo / '.factory' / 't25.db'}")
    try:
        return await store.get_task(ref)
    finally:
        await store.close()


def _audit_in_pages_of_two(monkeypatch, capsys, *args: str) -> str:
    """`t25 audit` run in this process reading two lines at a time, so a void comes a page
    after the line it voids."""
    monkeypatch.setattr(audit_cli, "PAGE", 2)
    capsys.readouterr()
    assert main(["audit", *args]) == 0
    return capsys.readouterr().out


def test_an_approval_with_a_comment_is_bound_to_the_plan_and_a_refused_merge_is_voided(
    t25, repo, monkeypatch, capsys
):
    assert t25("init").code == 0
    (repo / "t25.yaml").write_text(PIPELINE_CONFIG)
    assert t25("task", "new", "Risky", "--description", "scripted: risk=high").code == 0
    assert t25("run").code == 0
    (requested,) = asyncio.run(_events(repo, ApprovalRequested))

    approved = t25("--actor", "ana", "approve", "T-1", "--comment", "hi")
    assert approved.code == 0, approved.err
    (line,) = _lines(repo)
    assert (line["decision"], line["reason"]) == ("approve", "hi")
    assert line["bound_to"] == f"sha256:{requested.plan_sha256}"
    assert f"recorded on sha256:{requested.plan_sha256}" in approved.out
    (decided,) = asyncio.run(_events(repo, DecisionRecorded))
    assert (decided.reason, decided.bound_to) == ("hi", line["bound_to"])
    queued = asyncio.run(_events(repo, RunQueued))[-1]
    assert decided.id < queued.id  # the run's prompt may read the decision: it comes first
    history = t25("task", "show", "T-1").out
    assert (
        f"AWAITING_APPROVAL → IMPLEMENTING  by {ME} (claimed ana)  — plan sha256:{requested.plan_sha256} "
        "approved: hi" in history
    )
    assert f"on sha256:{requested.plan_sha256}  — hi" in t25("audit").out

    assert t25("run").code == 0
    (repo / "app.py").write_text("# an operator's edit, not committed\n")
    refused = t25("--actor", "ana", "merge", "T-1")
    assert refused.code == 1 and "uncommitted changes" in refused.err
    assert len(_lines(repo)) == 1  # refused before its line: nothing recorded, nothing changed
    git_sync("checkout", "--", "app.py", cwd=repo)

    # A check that dirties the main checkout while the merge is tried (once, unconfined):
    # the merge's line is written, its landing is refused, and the line is voided.
    marker = repo.parent / "dirtied-once"
    dirty = (
        f'case "$PWD" in */.merge/*) [ -e {marker} ] || '
        f'{{ touch {marker}; echo "# meanwhile" >> {repo / "app.py"}; }};; esac'
    )
    (repo / "t25.yaml").write_text(
        PIPELINE_CONFIG
        + f"sandbox: none\nqa:\n  checks: [{{name: meddle, run: [sh, -c, '{dirty}']}}]\n"
    )
    refused = t25("--actor", "ana", "merge", "T-1")
    assert refused.code == 1 and "uncommitted changes" in refused.err
    merge, void = _lines(repo)[1:]
    assert (merge["decision"], void["decision"], void["voids"]) == ("merge", "void", 2)
    assert void["actor"] == "t25" and "did not take effect" in void["reason"]
    assert "uncommitted changes" in void["reason"]
    assert not asyncio.run(_task(repo, "T-1")).merged
    shown = t25("audit").out.splitlines()
    assert "[did not take effect: see line 3]" in shown[1] and "void" in shown[2]
    monkeypatch.chdir(repo)
    assert _audit_in_pages_of_two(monkeypatch, capsys) == "\n".join(shown) + "\n"
    paged = json.loads(_audit_in_pages_of_two(monkeypatch, capsys, "--json"))
    assert [(e["seq"], e["voided_by"]) for e in paged["entries"]] == [(1, None), (2, 3), (3, None)]
    assert [e.decision for e in asyncio.run(_events(repo, DecisionRecorded))] == ["approve"]

    git_sync("checkout", "--", "app.py", cwd=repo)
    merged = t25("--actor", "ana", "merge", "T-1")
    assert merged.code == 0, merged.err
    assert asyncio.run(_task(repo, "T-1")).merged
    assert [line["decision"] for line in _lines(repo)] == ["approve", "merge", "void", "merge"]
    assert [e.decision for e in asyncio.run(_events(repo, DecisionRecorded))] == [
        "approve",
        "merge",
    ]
    verify = t25("audit", "verify")
    assert verify.code == 0 and "4 entries, chain intact" in verify.out


def test_refusals_tied_to_a_tasks_state_say_what_fits_instead(t25, repo):
    assert t25("init").code == 0
    assert t25("task", "new", "Plain").code == 0
    rejected = t25("reject", "T-1", "--reason", "too big")
    assert rejected.code == 1
    assert "T-1 is RECEIVED; only a task in AWAITING_APPROVAL can be rejected" in rejected.err
    assert "hint: t25 task show T-1" in rejected.err
    approved = t25("approve", "T-1")
    assert "only a task in AWAITING_APPROVAL can be approved" in approved.err
    assert "hint: t25 task show T-1" in approved.err
    answered = t25("answer", "T-1", "EUR")
    assert "only a task in NEEDS_INPUT can be answered" in answered.err
    assert "hint: t25 task show T-1" in answered.err
    assert "hint:" in t25("retry", "T-1").err
    assert t25("cancel", "T-1").code == 0
    cancelled = t25("cancel", "T-1")
    assert "T-1 is already CANCELLED; there is nothing to cancel" in cancelled.err
    assert "hint: t25 archive T-1" in cancelled.err
    merged = t25("merge", "T-1")
    assert "cannot be merged" in merged.err and "hint: t25 task show T-1" in merged.err
    assert [line["decision"] for line in _lines(repo)] == ["cancel"]  # refusals write nothing


def test_an_actor_is_bounded_and_plain_at_the_door(t25, repo):
    assert t25("init").code == 0
    assert t25("task", "new", "Plain").code == 0
    for actor, why in (
        ("a" * 101, "actor is 101 characters long"),
        ("ana\x1b[2J", "actor holds a control character (U+001B"),
        ("ana\u2028bo", "actor holds a control character (U+2028"),
    ):
        refused = t25("--actor", actor, "cancel", "T-1")
        assert refused.code == 1 and why in refused.err, refused.err
    refused = t25("cancel", "T-1", "--reason", "not\u0085now")
    assert refused.code == 1 and "reason holds a control character (U+0085" in refused.err
    assert _lines(repo) == []
    assert "RECEIVED" in t25("task", "show", "T-1").out


async def test_a_five_megabyte_actor_is_refused_over_rest_and_in_the_factory(shop):
    env = Env(shop)
    control: ControlPlane = await env.open()
    try:
        await control.new_task("Plain", actor="ana")
        api = make_api(control, worker_credential=None, operator_token=None)
        async with (
            serving(api) as url,
            httpx.AsyncClient(
                base_url=url, timeout=60, headers=operator_headers(control.config.root)
            ) as client,
        ):
            refused = await client.post("/tasks/T-1/cancel", json={"actor": "a" * 5_000_000})
            assert 400 <= refused.status_code < 500
            task = (await client.get("/tasks/T-1")).json()["task"]
            assert task["state"] == "RECEIVED"
        for actor in ("a" * 5_000_000, "ana\x00", ""):
            with pytest.raises(InvalidInput):
                await control.cancel("T-1", actor=actor)
        assert not control.audit.path.exists() or control.audit.entries() == []
        assert (await control.task("T-1")).state.value == "RECEIVED"
    finally:
        await env.close()


async def test_a_decision_is_a_value_every_face_hands_to_decide(shop):
    env = Env(shop)
    control = await env.open()
    try:
        await control.new_task("a task", actor="ana")
        done = await control.decide(
            Decision(verb=Verb.CANCEL, task="t1", actor="ana", text="not now")
        )
        assert done.state.value == "CANCELLED"
        [entry] = control.audit.entries(task="T-1")
        assert (entry.decision, entry.actor, entry.reason) == ("cancel", "ana", "not now")
        with pytest.raises(ValidationError):
            Decision(verb="approve", task="T-1", actor="ana", surprise=1)  # type: ignore[call-arg]
    finally:
        await env.close()
