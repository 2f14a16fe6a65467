"""On Postgres the audit chain lives in the store: decisions from any checkout extend one
chain, each line committed with its decision's effect; `.factory/audit.jsonl` on every
checkout is a mirror, repaired when it lags and reported when it differs."""

from __future__ import annotations

import asyncio
import json
import subprocess
from collections.abc import AsyncIterator
from dataclasses import dataclass
from pathlib import Path

import asyncpg
import pytest
import yaml

from core.config.schema import load_config
from core.control import audit_chain, audit_cross
from core.control.audit import AuditLog, cross_check
from core.control.audit_lines import verify_lines
from core.control.overtaken import RULED_AGAIN
from core.control.service import ControlPlane
from core.domain.events import DecisionRecorded
from core.domain.models import TaskState
from core.errors import AuditError, MergeRefused, StaleState
from core.ports import Store
from core.workspace.trial_merge import TrialMerge
from core.workspace.worktrees import Cleanup
from store import open_store
from tests.support.backends import PostgresBackend
from tests.support.repos import make_repo
from tests.support.sealed import passed_review

pytestmark = pytest.mark.postgres


@dataclass
class Checkout:
    """One checkout of the repository, with its own `.factory`, on the shared database."""

    control: ControlPlane
    store: Store

    @property
    def audit(self) -> AuditLog:
        return self.control.audit

    @property
    def mirror(self) -> Path:
        return self.control.audit.path


async def _checkout(path: Path, url: str) -> Checkout:
    repo = make_repo(path, exclude_factory=True)
    (repo / "t25.yaml").write_text(
        yaml.safe_dump(
            {
                "projects": [{"name": "shop", "repo": "."}],
                "store": {"url": url},
                # checkouts sharing a store share T25's key, as serve replicas do
                "audit": {"key_file": str(path.parent / "shared-audit.key")},
            }
        )
    )
    store = await open_store(url)
    control = ControlPlane(load_config(repo / "t25.yaml"), store)
    await control.sync_projects()
    return Checkout(control, store)


@pytest.fixture
def db(pg_database: PostgresBackend) -> PostgresBackend:
    return pg_database


@pytest.fixture
async def two(db: PostgresBackend, tmp_path: Path) -> AsyncIterator[tuple[Checkout, Checkout]]:
    first = await _checkout(tmp_path / "one", db.url)
    second = await _checkout(tmp_path / "two", db.url)
    yield first, second
    await first.store.close()
    await second.store.close()


async def _sql(url: str, statement: str, *args: object) -> object:
    con = await asyncpg.connect(url)
    try:
        return await con.fetch(statement, *args)
    finally:
        await con.close()


async def test_two_checkouts_extend_one_chain_and_both_verify(two, db):
    one, other = two
    a = await one.control.new_task("first", actor="ana")
    b = await other.control.new_task("second", actor="bo")
    await one.control.cancel(a.id, actor="ana", reason="not needed")
    await other.control.cancel(b.id, actor="bo", reason="nor this")
    await one.control.archive(b.id, actor="ana")
    await other.control.archive(a.id, actor="bo")

    rows = await _sql(db.url, "SELECT seq, task FROM audit_chain ORDER BY seq")
    assert [(r["seq"], r["task"]) for r in rows] == [
        (1, a.id),
        (2, b.id),
        (3, b.id),
        (4, a.id),
    ]
    for checkout in two:
        verdict = await checkout.audit.verify()
        assert verdict.ok and verdict.lines == 4, verdict.message
        assert verdict.head is not None and verdict.head.seq == 4
        assert "store's chain" in verdict.message
        trail = await checkout.control.audit_trail()
        assert [e.actor for e in trail.entries] == ["ana", "bo", "ana", "bo"]
    assert one.mirror.read_bytes() == other.mirror.read_bytes()
    verdict = verify_lines(enumerate(one.mirror.read_text().splitlines(), start=1), verdict.head)
    assert verdict.ok, verdict.message


async def test_a_mirror_behind_torn_or_missing_is_repaired_not_tampered(two):
    one, other = two
    task = await one.control.new_task("t", actor="ana")
    await one.control.cancel(task.id, actor="ana")
    await one.control.archive(task.id, actor="ana")
    whole = one.mirror.read_bytes()
    assert not other.mirror.exists()  # the other checkout decided nothing yet

    verdict = await other.audit.verify()
    assert verdict.ok and "2 lines behind, brought up to date" in verdict.message
    assert other.mirror.read_bytes() == whole

    first = whole.split(b"\n")[0]
    one.mirror.write_bytes(first + b"\n" + b'{"seq": 2, "ts": "20')  # behind, and torn
    verdict = await one.audit.verify()
    assert verdict.ok, verdict.message
    assert one.mirror.read_bytes() == whole


async def test_a_mirror_that_differs_is_reported_and_left_as_it_is(two):
    one, _ = two
    task = await one.control.new_task("t", actor="ana")
    await one.control.cancel(task.id, actor="ana", reason="why")
    await one.control.archive(task.id, actor="ana")
    lines = one.mirror.read_text().splitlines()
    edited = lines[1].replace('"archive"', '"cancel"')
    one.mirror.write_text(lines[0] + "\n" + edited + "\n")

    verdict = await one.audit.verify()
    assert not verdict.ok and verdict.bad_line == 2
    assert "differs from the store's chain, which is intact" in verdict.message
    assert one.mirror.read_text().splitlines()[1] == edited

    one.mirror.write_text("\n".join(lines) + "\n" + lines[1] + "\n")  # a line too many
    verdict = await one.audit.verify()
    assert not verdict.ok and verdict.bad_line == 3


async def test_a_line_edited_or_deleted_in_the_store_is_named(two, db):
    one, _ = two
    for n in range(3):
        task = await one.control.new_task(f"t{n}", actor="ana")
        await one.control.cancel(task.id, actor="ana", reason=f"why {n}")
    await _sql(
        db.url, "UPDATE audit_chain SET line = replace(line, 'why 1', 'why not') WHERE seq = 2"
    )
    verdict = await one.audit.verify()
    assert not verdict.ok and verdict.bad_line == 2 and "edited" in verdict.message
    assert "store's chain" in verdict.message

    await _sql(db.url, "DELETE FROM audit_chain WHERE seq = 2")
    verdict = await one.audit.verify()
    assert not verdict.ok and verdict.bad_line == 2


async def test_an_effect_that_fails_commits_its_line_with_a_void(two):
    one, other = two
    task = await one.control.new_task("t", actor="ana")
    # A worker moves the task between the decider's read and its write, at every try: the
    # CAS fails each time, and each line is voided; the last failure reaches the caller.
    real = one.store.apply_decision
    steps = iter((TaskState.SPEC, TaskState.PLAN, TaskState.IMPLEMENTING, TaskState.QA))

    async def moved_meanwhile(write):
        await other.control.transition(
            await other.control.task(task.id), next(steps), actor="worker"
        )
        return await real(write)

    one.store.apply_decision = moved_meanwhile  # type: ignore[method-assign]
    with pytest.raises(StaleState):
        await one.control.cancel(task.id, actor="ana", reason="too late")
    one.store.apply_decision = real  # type: ignore[method-assign]

    trail = await one.control.audit_trail()
    tries = 1 + RULED_AGAIN
    assert [(e.seq, e.decision, e.voids) for e in trail.entries] == [
        entry
        for n in range(tries)
        for entry in ((2 * n + 1, "cancel", None), (2 * n + 2, "void", 2 * n + 1))
    ]
    assert trail.verdict.ok, trail.verdict.message
    assert (await one.control.task(task.id)).state is TaskState.QA


async def test_a_log_kept_before_the_chain_moved_into_the_store_is_taken_over(db, tmp_path):
    sqlite = await open_store(f"sqlite:///{tmp_path / 'old.db'}")
    mirror = tmp_path / "one" / ".factory" / "audit.jsonl"
    old = AuditLog(mirror, sqlite)
    for n in range(3):
        await old.append(actor="ana", task=f"T-{n + 1}", decision="cancel", reason=f"{n}\u2028")
    anchor = await sqlite.get_audit_anchor()
    await sqlite.close()
    # As an earlier T25 wrote them: separators raw, not escaped (the hashes do not change).
    raw = [
        json.dumps(json.loads(line), ensure_ascii=False)
        for line in mirror.read_text().split("\n")[:-1]
    ]
    mirror.write_text("".join(line + "\n" for line in raw))
    one = await _checkout(tmp_path / "one", db.url)
    try:
        await one.store.set_audit_anchor(anchor, previous=None)  # as the earlier T25 left it
        task = await one.control.new_task("t", actor="ana")
        await one.control.cancel(task.id, actor="bo")
        trail = await one.control.audit_trail()
        assert [e.actor for e in trail.entries] == ["ana", "ana", "ana", "bo"]
        assert trail.verdict.ok and trail.verdict.lines == 4, trail.verdict.message
        assert mirror.read_text().split("\n")[:3] == raw  # kept as they were
    finally:
        await one.store.close()


async def test_the_trail_pages_with_a_cursor(two):
    one, _ = two
    for n in range(7):
        task = await one.control.new_task(f"t{n}", actor="ana")
        await one.control.cancel(task.id, actor="ana")
    seen, after = [], 0
    for _ in range(10):
        trail = await one.control.audit.trail(after=after, limit=3)
        seen += [e.seq for e in trail.entries]
        assert trail.verdict.ok
        if trail.next is None:
            break
        after = trail.next
    assert seen == list(range(1, 8))
    page = await one.control.audit.trail(task="T-3", limit=5)
    assert [e.task for e in page.entries] == ["T-3"] and page.next is None
    lines = [json.loads(line) for line in one.mirror.read_text().splitlines()]
    assert [line["seq"] for line in lines] == list(range(1, 8))


async def test_verify_while_another_checkout_decides_sees_a_whole_chain(two):
    one, other = two
    tasks = [(await other.control.new_task(f"t{n}", actor="bo")).id for n in range(15)]
    await one.control.cancel((await one.control.new_task("first", actor="ana")).id, actor="ana")
    deciding = True

    async def decide() -> None:
        nonlocal deciding
        try:
            for task in tasks:
                await other.control.cancel(task, actor="bo")
        finally:
            deciding = False

    async def watch() -> list[str]:
        broken = []
        for _ in range(500):
            verdict = await one.audit.verify()
            if not verdict.ok:
                broken.append(verdict.message)
            if not deciding:
                break
        return broken

    _, broken = await asyncio.gather(decide(), watch())
    assert broken == []
    assert (await one.audit.verify()).lines == 16


async def test_a_line_added_past_the_anchor_is_named_and_not_built_on(two, db):
    one, _ = two
    task = await one.control.new_task("t", actor="ana")
    await one.control.cancel(task.id, actor="ana")
    await _sql(
        db.url,
        "INSERT INTO audit_chain (seq, line, hash, task, at) VALUES (2, '{}', 'x', NULL, now())",
    )
    verdict = await one.audit.verify()
    assert not verdict.ok and verdict.bad_line == 2 and "added outside T25" in verdict.message
    with pytest.raises(AuditError, match="already holds line 2"):
        await one.control.archive(task.id, actor="ana")
    assert not (await one.control.task(task.id)).archived


class _Trees:
    """A project's worktrees as a merge sees them: the merge is tried, then git refuses to
    land it, or lands it."""

    default_branch = "trunk"

    def __init__(self, refuses: bool, repo: Path) -> None:
        self.refuses, self.repo = refuses, repo  # a repository without the reviewed commit
        self.merges = self.trees = self  # its merging part (Worktrees.merges) is this same fake

    async def holds(self, task) -> bool:
        return True  # the checkout is here: this process merges

    async def moved_since_review(self, task) -> None:
        return None

    async def tip(self, task) -> str:
        return "b" * 40

    async def trial_merge(self, task, *, message: str) -> TrialMerge:
        return TrialMerge(task.id, task.branch, "c" * 40, "a" * 40, "b" * 40, Path("/nonexistent"))

    async def land(self, trial: TrialMerge) -> str:
        if self.refuses:
            raise MergeRefused("git refused: uncommitted changes in the main checkout")
        return trial.commit

    async def discard(self, trial: TrialMerge) -> None:
        return None

    async def cleanup(self, task) -> Cleanup:
        return Cleanup(False, "kept")


class _Killed(BaseException):
    """The process ending between git's merge and the store's write."""


async def test_a_merge_commits_its_line_before_git_and_is_voided_or_named_unapplied(
    two, db, tmp_path
):
    one, _ = two
    await asyncio.to_thread(subprocess.run, ["git", "init", "-q", str(tmp_path)], check=True)
    refused, cut = [(await one.control.new_task(t, actor="ana")).id for t in ("a", "b")]
    for ref in (refused, cut):
        await passed_review(one.control, await one.control.task(ref), "a" * 40)
    one.control.worktrees = lambda project: _Trees(refuses=True, repo=tmp_path)  # type: ignore[method-assign]
    with pytest.raises(MergeRefused):
        await one.control.merge(refused, actor="ana")
    trail = await one.control.audit_trail()
    assert [(e.decision, e.voids) for e in trail.entries] == [("merge", None), ("void", 1)]
    assert trail.verdict.ok

    one.control.worktrees = lambda project: _Trees(refuses=False, repo=tmp_path)  # type: ignore[method-assign]

    async def dies(write):
        raise _Killed

    one.store.apply_decision = dies  # type: ignore[method-assign]
    with pytest.raises(_Killed):
        await one.control.merge(cut, actor="ana")
    trail = await one.control.audit_trail()
    assert trail.verdict.ok and trail.entries[-1].decision == "merge"
    recorded = [
        e for e in await one.store.events_after(0, limit=1000) if isinstance(e, DecisionRecorded)
    ]
    assert cross_check(trail.entries, recorded) == [
        (
            f"line 3: merge of {cut} by ana has no effect in the store: "
            f"`t25 merge {cut}` records it if the default branch holds it"
        )
    ]


async def test_verify_and_the_cross_check_read_the_chain_and_the_decisions_a_page_at_a_time(
    two, monkeypatch
):
    one, _ = two
    for title in ("a", "b", "c"):
        task = await one.control.new_task(title, actor="ana")
        await one.control.cancel(task.id, actor="ana", reason=f"not {title}")
        await one.control.archive(task.id, actor="ana")
    monkeypatch.setattr(audit_chain, "PAGE", 2)
    monkeypatch.setattr(audit_cross, "PAGE", 2)
    asked: list[tuple[str, int]] = []
    lines, events = one.store.audit_lines, one.store.events_after  # type: ignore[attr-defined]

    async def audit_lines(**kw):
        asked.append(("lines", kw["limit"]))
        return await lines(**kw)

    async def events_after(after_id, **kw):
        asked.append((kw.get("kind") or "every kind", kw["limit"]))
        return await events(after_id, **kw)

    monkeypatch.setattr(one.store, "audit_lines", audit_lines)
    monkeypatch.setattr(one.store, "events_after", events_after)

    verdict = await one.audit.verify()
    assert verdict.ok and verdict.lines == 6, verdict.message
    assert await one.control.audit_disagreements() == []
    assert {limit for _, limit in asked} <= {1, 2}, asked  # 1: the chain's head, looked up
    assert [what for what, _ in asked].count("decision_recorded") >= 3, asked
    assert "every kind" not in {what for what, _ in asked}, asked
