"""A merge git has landed is recorded, whatever the store does meanwhile.

The postmaster of a throwaway cluster (tests/support/pg_cluster.py) is stopped the moment git has
fast-forwarded the default branch: a `git` first on serve's or `t25 merge`'s PATH runs the
real one, then, after the merge's fast-forward, stops Postgres (`pg_ctl -m immediate`, a
crash's stop) before T25 hears back. Twenty seconds later the test starts it again. The
merge is then recorded (200 over REST, exit 0 on the command line), the audit log verifies,
and the default branch holds the merge once. Before, the request failed with 503 or exit 1,
the task stayed unmerged with its line neither applied nor voided, and merging again was
refused as "nothing to merge".
"""

from __future__ import annotations

import asyncio
import os
import shlex
import shutil
import subprocess
import sys
import uuid
from pathlib import Path

import pytest

from core.config.schema import DATABASE_URL_ENV
from core.control.audit import cross_check
from core.domain.events import DecisionRecorded
from core.domain.models import TaskState as S
from core.errors import MergeUnrecorded, StoreUnavailable
from core.workspace.git import git_sync
from tests.support.pipeline import PIPELINE_CONFIG, trunk_log
from tests.support.serve_process import serve_process
from tests.support.waiting import until

CMD = [sys.executable, "-m", "t25_tui"]
OUTAGE_S = 20.0


def _git_that_stops_postgres(where: Path, cluster, flag: Path) -> dict[str, str]:
    """PATH with a `git` that stops `cluster` right after the first fast-forward it makes."""
    real = shutil.which("git")
    assert real is not None
    prefix = ["runuser", "-u", "postgres", "--"] if os.geteuid() == 0 else []
    stop = [*prefix, str(cluster.bindir / "pg_ctl"), "-D", str(cluster.data)]
    stop += ["-m", "immediate", "-w", "stop"]
    where.mkdir()
    script = where / "git"
    script.write_text(
        "#!/bin/sh\n"
        f'{shlex.quote(real)} "$@"\n'
        "rc=$?\n"
        f"if [ $rc -eq 0 ] && [ ! -e {shlex.quote(str(flag))} ]; then\n"
        '  case " $* " in *" merge --ff-only "*)\n'
        f"    {shlex.join(stop)} >/dev/null 2>&1; : > {shlex.quote(str(flag))};;\n"
        "  esac\n"
        "fi\n"
        "exit $rc\n"
    )
    script.chmod(0o755)
    return {"PATH": f"{where}{os.pathsep}{os.environ['PATH']}"}


def _done_task(repo: Path, env: dict[str, str]) -> None:
    """T-1 taken to DONE by the scripted agents, on the cluster's store."""
    for argv in (["init"], ["task", "new", "Greeting"], ["run"]):
        if argv == ["task", "new", "Greeting"]:
            (repo / "t25.yaml").write_text(PIPELINE_CONFIG)
        done = subprocess.run(
            [*CMD, *argv], cwd=repo, env=env, capture_output=True, text=True, timeout=300
        )
        assert done.returncode == 0, done.stderr
    listed = subprocess.run(
        [*CMD, "task", "list", "--state", "DONE"], cwd=repo, env=env, capture_output=True,
        text=True, timeout=60,
    )  # fmt: skip
    assert "T-1" in listed.stdout, listed.stdout + listed.stderr


def _t25(repo: Path, env: dict[str, str], *argv: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [*CMD, *argv], cwd=repo, env=env, capture_output=True, text=True, timeout=120
    )


def _merges_of_t1(repo: Path) -> list[str]:
    log = git_sync("log", "--merges", "--format=%s", "trunk", cwd=repo)
    return [line for line in log.splitlines() if "(T-1)" in line]


async def _outage_after_the_fast_forward(cluster, flag: Path) -> None:
    await until(flag.exists, timeout=240, what="the merge's fast-forward")
    await asyncio.sleep(OUTAGE_S)  # not a wait: the outage itself
    await asyncio.to_thread(cluster.start)


def _store(cluster) -> dict[str, str]:
    url = cluster.new_database(f"t25_{uuid.uuid4().hex[:12]}")
    return {**os.environ, DATABASE_URL_ENV: url}


def _recorded(repo: Path, env: dict[str, str]) -> None:
    """T-1 merged in the store, the default branch holding its merge once, the log whole."""
    listed = _t25(repo, env, "task", "list", "--state", "DONE")  # merged: finished, not listed
    assert any("DONE merged" in line for line in listed.stdout.splitlines() if "T-1" in line)
    assert len(_merges_of_t1(repo)) == 1
    verified = _t25(repo, env, "audit", "verify")
    assert verified.returncode == 0, verified.stdout + verified.stderr


@pytest.mark.postgres
@pytest.mark.slow
async def test_a_merge_the_store_misses_for_20_s_is_recorded_from_the_command_line(
    shop, tmp_path, cluster
):
    env = _store(cluster)
    _done_task(shop, env)
    flag = tmp_path / "stopped"
    env |= _git_that_stops_postgres(tmp_path / "bin", cluster, flag)
    merging = await asyncio.create_subprocess_exec(
        *CMD, "merge", "T-1", cwd=shop, env=env,
        stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE,
    )  # fmt: skip
    await _outage_after_the_fast_forward(cluster, flag)
    out, err = await asyncio.wait_for(merging.communicate(), timeout=240)
    assert merging.returncode == 0, err.decode()
    assert "merged T-1 into trunk" in out.decode()
    assert "recording it as soon as it answers" in err.decode()
    _recorded(shop, env)


@pytest.mark.postgres
@pytest.mark.slow
async def test_a_merge_the_store_misses_for_20_s_is_recorded_over_rest(shop, tmp_path, cluster):
    env = _store(cluster)
    _done_task(shop, env)
    flag = tmp_path / "stopped"
    path = _git_that_stops_postgres(tmp_path / "bin", cluster, flag)
    async with serve_process(
        shop, tmp_path, env={DATABASE_URL_ENV: env[DATABASE_URL_ENV], **path}
    ) as s:
        merge = asyncio.ensure_future(s.client.post("/tasks/T-1/merge", json={}, timeout=240))
        await _outage_after_the_fast_forward(cluster, flag)
        answered = await asyncio.wait_for(merge, timeout=240)
        assert answered.status_code == 200, answered.text
        assert answered.json()["merged"] is True
    _recorded(shop, env)


async def test_a_merge_git_holds_but_the_store_does_not_is_recorded_by_merging_again(env):
    """A merge whose record was lost for good (the store away past its patience): merging
    again records it under the line that decided it, and the log verifies."""
    control = await env.open()
    task = await env.new()
    await env.work()
    assert (await env.task(task.id)).state is S.DONE
    control.store_patience_s = 1.0
    applying = control.store.apply_decision

    async def away(write):
        raise StoreUnavailable("the store is restarting")

    control.store.apply_decision = away  # type: ignore[method-assign]
    with pytest.raises(MergeUnrecorded) as lost:
        await control.merge(task.id, actor="ana", reason="ship it")
    assert lost.value.hint == f"once the store answers, `t25 merge {task.id}` records it"
    assert len([s for s in trunk_log(env.repo) if f"({task.id})" in s]) == 1
    control.store.apply_decision = applying  # type: ignore[method-assign]
    trail = await control.audit_trail()
    assert [e.decision for e in trail.entries] == ["merge"]  # neither applied nor voided

    merged = await control.merge(task.id, actor="bo")
    assert merged.merged
    assert len([s for s in trunk_log(env.repo) if f"({task.id})" in s]) == 1
    trail = await control.audit_trail()
    assert [e.decision for e in trail.entries] == ["merge"] and trail.verdict.ok
    recorded = await control.store.events_after(0, limit=1000)
    decided = [e for e in recorded if isinstance(e, DecisionRecorded)]
    assert [(d.actor, d.reason) for d in decided] == [("ana", "ship it")]
    assert cross_check(trail.entries, decided) == []


async def test_a_branch_merged_outside_t25_is_recorded_not_refused(env):
    """The reviewed commit already in the default branch (merged by hand): `t25 merge`
    records the merge under a line of its own. Before: "nothing to merge"."""
    control = await env.open()
    task = await env.new()
    await env.work()
    task = await env.task(task.id)
    git_sync("merge", "--no-ff", "-q", "-m", "by hand", task.branch, cwd=env.repo)
    merged = await control.merge(task.id, actor="ana")
    assert merged.merged
    trail = await control.audit_trail()
    assert [e.decision for e in trail.entries] == ["merge"] and trail.verdict.ok
