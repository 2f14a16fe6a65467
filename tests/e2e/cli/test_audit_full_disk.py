"""A decision whose audit line cannot be written changes nothing: on a real full disk (a small
tmpfs mounted for `.factory/`), through the real `t25` binary and a real `t25 serve`."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

import httpx
import pytest
import yaml

from core.config.schema import load_config
from core.control.service import ControlPlane
from store import open_store
from t25_tui.api.server import make_api
from tests.support.full_disk import FullDisk
from tests.support.operators import operator_headers
from tests.support.serving import serving

LONG = "x" * 9000  # a line bigger than the slack left in the log's last page


@pytest.fixture
def factory_on_tmpfs(repo: Path, tmp_path: Path):
    """The repository with its `.factory/` on a 256 KiB tmpfs, and its store kept elsewhere
    (so only the audit log's disk is full)."""
    (repo / ".git" / "info" / "exclude").write_text("/.factory/\n/t25.yaml\n")
    config = {
        "projects": [{"name": "shop", "repo": "."}],
        "store": {"url": f"sqlite:///{tmp_path / 'db' / 't25.db'}"},
    }
    (repo / "t25.yaml").write_text(yaml.safe_dump(config))
    (tmp_path / "db").mkdir()
    mounted = repo / ".factory"
    mounted.mkdir()
    subprocess.run(["mount", "-t", "tmpfs", "-o", "size=256k", "tmpfs", str(mounted)], check=True)
    try:
        yield repo, FullDisk(mounted)
    finally:
        subprocess.run(["umount", "-l", str(mounted)], check=True)


def _whole(log: Path) -> list[dict]:
    """Every line of the log, each ending with its newline and parsing as JSON."""
    data = log.read_bytes()
    assert data.endswith(b"\n")
    return [json.loads(line) for line in data.split(b"\n")[:-1]]


def _state(t25, ref: str) -> str:
    return t25("task", "show", ref).out.splitlines()[1].split()[1]


def test_a_full_disk_refuses_decisions_from_the_command_line_and_changes_nothing(
    t25, factory_on_tmpfs
):
    repo, disk = factory_on_tmpfs
    for n in (1, 2, 3):
        assert t25("task", "new", f"task {n}").code == 0
    assert t25("--actor", "ana", "cancel", "T-1", "--reason", "first").code == 0
    log = repo / ".factory" / "audit.jsonl"
    disk.fill()
    before = log.read_bytes()

    for verb in ("cancel", "cancel", "archive"):  # the second try meets no torn line either
        ref = "T-1" if verb == "archive" else "T-2"
        refused = t25("--actor", "ana", verb, ref, "--reason", LONG)
        assert refused.code == 1, refused.out
        assert "could not write the audit log" in refused.err
        assert "No space left on device" in refused.err
        assert log.read_bytes() == before
    assert _state(t25, "T-2") == "RECEIVED"
    assert "(archived)" not in t25("task", "show", "T-1").out
    assert t25("audit", "verify").code == 0

    disk.free()
    assert t25("--actor", "ana", "cancel", "T-2", "--reason", LONG).code == 0
    assert _state(t25, "T-2") == "CANCELLED"
    assert [e["reason"] for e in _whole(log)] == ["first", LONG]
    verify = t25("audit", "verify")
    assert verify.code == 0 and "2 entries, chain intact" in verify.out


async def test_a_full_disk_refuses_decisions_over_rest_and_changes_nothing(factory_on_tmpfs):
    repo, disk = factory_on_tmpfs
    config = load_config(repo / "t25.yaml")
    store = await open_store(config.store_url)
    control = ControlPlane(config, store)
    try:
        await control.sync_projects()
        for n in (1, 2):
            await control.new_task(f"task {n}", actor="ana")
        await control.cancel("T-1", actor="ana", reason="first")
        ops = operator_headers(control.config.root)  # the host's token, made before the disk fills
        disk.fill()
        before = control.audit.path.read_bytes()
        api = make_api(control, worker_credential=None, operator_token=None)
        async with (
            serving(api) as url,
            httpx.AsyncClient(base_url=url, timeout=30, headers=ops) as client,
        ):
            for _ in range(2):
                refused = await client.post(
                    "/tasks/T-2/cancel", json={"actor": "ana", "reason": LONG}
                )
                assert refused.status_code == 503  # not a bad request: the disk
                assert "could not write the audit log" in refused.json()["error"]
                assert control.audit.path.read_bytes() == before
                task = (await client.get("/tasks/T-2")).json()["task"]
                assert task["state"] == "RECEIVED"
            audit = (await client.get("/audit")).json()
            assert audit["verified"] and len(audit["entries"]) == 1

            disk.free()
            done = await client.post("/tasks/T-2/cancel", json={"actor": "ana", "reason": LONG})
            assert done.status_code == 200 and done.json()["state"] == "CANCELLED"
            audit = (await client.get("/audit")).json()
            assert audit["verified"] and [e["task"] for e in audit["entries"]] == ["T-1", "T-2"]
        decided = [
            e.task_id
            for e in await control.store.events_after(0, limit=1000)
            if e.kind == "decision_recorded"
        ]
        assert decided == ["T-1", "T-2"]
    finally:
        await store.close()


def test_a_torn_line_left_by_an_older_t25_is_set_aside_reported_and_never_blocks(t25, repo):
    assert t25("init").code == 0
    for n in (1, 2):
        assert t25("task", "new", f"task {n}").code == 0
    assert t25("cancel", "T-1").code == 0
    log = repo / ".factory" / "audit.jsonl"
    whole = log.read_bytes()
    with log.open("ab") as fh:  # what a write cut short by a full disk used to leave
        fh.write(b'{"actor": "ana", "decision": "cancel", "hash": "7f3')

    done = t25("cancel", "T-2")
    assert done.code == 0, done.err
    (aside,) = repo.glob(".factory/audit.jsonl.torn-*")
    assert aside.read_bytes() == b'{"actor": "ana", "decision": "cancel", "hash": "7f3'
    assert len([line for line in done.err.splitlines() if "torn" in line]) == 1
    assert str(aside) in done.err
    assert log.read_bytes().startswith(whole) and len(_whole(log)) == 2
    verify = t25("audit", "verify")
    assert verify.code == 0 and "2 entries, chain intact" in verify.out and aside.name in verify.out
