"""The hostile cases, through the whole pipeline, in both modes: sandboxed (the default,
`sandbox: auto` with bubblewrap here) a prompt-injected agent's or QA check's attempt is
refused; unconfined (`sandbox: none`) it is caught and undone, or its processes killed.
The scripted agent does what a prompt-injected one would (`--misbehave ...`)."""

from __future__ import annotations

import ast
import contextlib
import hashlib
import json
import os
import signal
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from adapters import containment
from adapters.sandbox import bwrap_problem
from core.domain.models import ArtifactKind, TaskState
from core.workspace.git import git_sync
from tests.support.pipeline import ROLES, SCRIPTED, Env, working_in
from tests.support.sandbox import committed_check, dev
from tests.support.waiting import until, wait_until

S = TaskState
LEFTOVER = "LEFT_BEHIND_BY_AGENT.txt"

pytestmark = pytest.mark.skipif(
    bool(bwrap_problem()) and os.environ.get("T25_REQUIRE_PG") != "1",
    reason=f"bubblewrap cannot run here: {bwrap_problem()}",
)


def digest(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest() if path.exists() else "absent"


async def failed_dev(env: Env, sandbox: str, roles: dict) -> str:
    await env.open(roles=roles, sandbox=sandbox)
    task = await env.new()
    await env.work()
    task = await env.task(task.id)
    assert task.state is S.FAILED, task.error
    assert "IMPLEMENTING run" in task.error
    return task.error


# -- refused inside the sandbox ------------------------------------------------------------


async def test_sandboxed_the_shared_git_config_is_read_only(env, shop):
    config = digest(shop / ".git" / "config")
    error = await failed_dev(env, "auto", dev("plant:fsmonitor"))
    assert "'git', 'config', 'core.fsmonitor'" in error and "non-zero exit status" in error
    assert digest(shop / ".git" / "config") == config
    task = await env.task("T-1")
    assert task.violation is None  # nothing changed: nothing to undo


@pytest.mark.parametrize("what", ["hook", "attributes", "tag", "hookspath"])
async def test_sandboxed_no_plant_reaches_the_shared_repository(env, shop, what):
    before = git_sync("for-each-ref", cwd=shop)
    await failed_dev(env, "auto", dev(f"plant:{what}"))
    assert not (shop / ".git" / "hooks" / "pre-commit").exists()
    assert not (shop / ".git" / "info" / "attributes").exists()
    assert "planted-tag" not in git_sync("for-each-ref", cwd=shop)
    assert "hookspath" not in (shop / ".git" / "config").read_text().lower()
    assert git_sync("for-each-ref", cwd=shop).count("\n") >= before.count("\n")
    assert not (shop.parent / "planted-ran").exists()


@pytest.mark.parametrize("sandbox", ["auto", "auto-view", "none"])
async def test_t25s_store_and_audit_log(env, shop, sandbox):
    """Sandboxed, `.factory/` is an empty read-only directory: the write is refused. Seen
    at the checkout's path (the view), the checkout's path shows the task's tree and T25's
    state is nowhere: the agent's path leads to nothing. Unconfined it is not (the
    fingerprint does not watch T25's own state): docs/guides/security.md says so, and this test keeps
    that statement true."""
    tree_at = "checkout" if sandbox == "auto-view" else "worktree"
    mode = "none" if sandbox == "none" else "auto"
    await env.open(roles=dev("store"), sandbox={"mode": mode, "tree_at": tree_at})
    db = shop / ".factory" / "t25.db"
    task = await env.new()
    await env.work()
    task = await env.task(task.id)
    written = b"written by t25-scripted-agent" in db.read_bytes()
    if sandbox == "auto":
        assert task.state is S.FAILED, task.state
        assert "Read-only file system" in task.error or "Permission denied" in task.error
        assert not written
    elif sandbox == "auto-view":
        assert task.state is S.FAILED, task.state
        assert "No such file or directory" in task.error
        assert not written
    else:
        assert written


async def test_sandboxed_a_qa_check_cannot_write_outside_the_worktree(env, shop):
    run = committed_check(
        shop,
        "check_escape.py",
        "import pathlib, subprocess\n"
        "common = subprocess.run(['git', 'rev-parse', '--git-common-dir'],\n"
        "                        capture_output=True, text=True, check=True).stdout.strip()\n"
        "pathlib.Path(common, 'FROM_A_CHECK.txt').write_text('x')\n",
    )
    checks = [{"name": "escape", "run": run, "required": True}]
    await env.open(qa={"checks": checks}, sandbox="auto", limits={"max_qa_loops": 0})
    task = await env.new()
    await env.work()
    task = await env.task(task.id)
    assert task.state in (S.NEEDS_INPUT, S.FAILED), task.state
    assert task.checks_passed is False
    assert not (shop / "FROM_A_CHECK.txt").exists()
    assert not (shop / ".git" / "FROM_A_CHECK.txt").exists()


async def test_sandboxed_the_agent_sees_none_of_t25s_processes(env, shop, monkeypatch):
    monkeypatch.setenv("FACTORY_WORKER_CREDENTIAL", "never-seen-credential")
    run = committed_check(
        shop,
        "check_proc.py",
        "import os\n"
        "seen = []\n"
        "for pid in filter(str.isdigit, os.listdir('/proc')):\n"
        "    try:\n"
        "        seen.append(open(f'/proc/{pid}/environ', 'rb').read())\n"
        "    except OSError:\n"
        "        pass\n"
        "pids = sorted(int(p) for p in filter(str.isdigit, os.listdir('/proc')))\n"
        "print('PROC', repr((pids, any(b'never-seen' in s for s in seen))), 'END')\n",
    )
    checks = [{"name": "proc", "run": run, "required": False}]
    control = await env.open(qa={"checks": checks}, sandbox="auto")
    task = await env.new()
    await env.work()
    qa = [
        a
        for a in await control.store.list_artifacts(task_id=task.id)
        if a.meta.kind is ArtifactKind.QA_REPORT
    ]
    _, report = await control.store.get_artifact(qa[0].id)
    printed = json.loads(report)["checks"][0]["excerpt"]
    pids, leaked = ast.literal_eval(printed[printed.index("PROC ") + 5 : printed.index(" END")])
    assert not leaked
    assert max(pids) < 10, pids  # the namespace's own: bwrap, the check, nothing of T25's


# -- nothing outlives its run --------------------------------------------------------------


@pytest.mark.parametrize("sandbox", ["auto", "none"])
@pytest.mark.parametrize("how", ["setsid", "setsid:scrubbed"])
async def test_a_child_that_leaves_its_session_dies_with_the_run(env, shop, sandbox, how):
    control = await env.open(roles=dev(how), sandbox=sandbox)
    task = await env.new()
    await env.work()
    root = control.config.worktrees.root
    # once no process works in a worktree, none is left that could write the leftover
    await until(lambda: not working_in(root), 30, lambda: _described(working_in(root)))
    assert not (root / task.id / LEFTOVER).exists()
    assert LEFTOVER not in git_sync("log", "--all", "--name-only", "--format=", cwd=shop)


@pytest.mark.parametrize("sandbox", ["auto", "none"])
async def test_only_a_run_outside_a_pid_namespace_is_searched_for_what_it_left(
    env, shop, sandbox, monkeypatch
):
    """Bubblewrap's PID namespace ends every process of a run with its first one, so no scan
    of /proc follows a run there that ended by itself (each took milliseconds on the event
    loop, a dozen times a task); under the reaper, the scan by the run's tag stays the last
    word, as it does after a run in bubblewrap that T25 stopped."""
    searched: list[str] = []
    kill_tagged = containment.kill_tagged

    def counted(tag: str) -> list[int]:
        searched.append(tag)
        return kill_tagged(tag)

    monkeypatch.setattr(containment, "kill_tagged", counted)
    control = await env.open(roles=dev("setsid:scrubbed"), sandbox=sandbox)
    task = await env.new()
    await env.work()
    root = control.config.worktrees.root
    await until(lambda: not working_in(root), 30, lambda: _described(working_in(root)))
    assert not (root / task.id / LEFTOVER).exists()
    assert (await env.task(task.id)).state is TaskState.DONE
    if sandbox == "auto":
        assert searched == []
    else:  # every agent run and every QA check
        assert len(searched) >= 6, searched


def _t25_run(shop: Path, sandbox: str, misbehave: str = "slow:60") -> subprocess.Popen[str]:
    roles = {role: [SCRIPTED] for role in ROLES}
    roles["dev"] = [{"adapter": "scripted", "args": ["--misbehave", misbehave]}]
    config = {"projects": [{"name": "shop", "repo": "."}], "roles": roles, "sandbox": sandbox}
    (shop / "t25.yaml").write_text(yaml.safe_dump(config))
    subprocess.run(
        [sys.executable, "-m", "t25_tui", "task", "new", "Add a greeting"],
        cwd=shop,
        check=True,
        capture_output=True,
        timeout=60,
    )
    with (shop.parent / "run.err").open("w") as stderr:
        return subprocess.Popen(
            [sys.executable, "-m", "t25_tui", "run"],
            cwd=shop,
            stdin=subprocess.DEVNULL,
            stdout=subprocess.DEVNULL,
            stderr=stderr,
            start_new_session=True,
        )


def _described(pids: list[int]) -> list[str]:
    """What each process is, for a failure's message: its command line and state."""
    out = []
    for pid in pids:
        try:
            argv = Path(f"/proc/{pid}/cmdline").read_bytes().replace(b"\0", b" ")[:200]
            state = Path(f"/proc/{pid}/stat").read_text().rpartition(")")[2].split()[:2]
        except OSError:
            continue
        out.append(f"{pid} {' '.join(state)}: {argv.decode(errors='replace')}")
    return out


@pytest.mark.parametrize("sandbox", ["auto", "none"])
@pytest.mark.parametrize("sig", [signal.SIGKILL, signal.SIGTERM])
def test_the_agent_dies_when_t25_run_does(shop, sandbox, sig):
    running = _t25_run(shop, sandbox)
    root = shop / ".factory" / "worktrees"
    try:
        wait_until(lambda: working_in(root), 90, "the dev agent started")
        os.kill(running.pid, sig)
        running.wait(timeout=30)
        wait_until(lambda: not working_in(root), 10, lambda: _described(working_in(root)))
    finally:
        if running.poll() is None:
            os.killpg(running.pid, signal.SIGKILL)
            running.wait(timeout=10)
    if sig == signal.SIGTERM:
        assert running.returncode == 128 + signal.SIGTERM
        assert "stopped by SIGTERM" in (shop.parent / "run.err").read_text()


def test_the_agents_children_die_with_a_killed_t25_run_without_waiting_for_a_restart(shop):
    """Unconfined, the agent's own child (deaf to SIGTERM) is gone once T25 is SIGKILLed:
    the run's reaper hears T25's death and kills what is below it before it dies."""
    running = _t25_run(shop, "none", misbehave="hang")
    root = shop / ".factory" / "worktrees"
    try:
        wait_until(lambda: _hanging(root), 90, "the agent's child running")
        os.kill(running.pid, signal.SIGKILL)
        running.wait(timeout=30)
        wait_until(lambda: not working_in(root), 10, lambda: _described(working_in(root)))
    finally:
        if running.poll() is None:
            os.killpg(running.pid, signal.SIGKILL)
            running.wait(timeout=10)
        for pid in working_in(root):
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, signal.SIGKILL)


def _hanging(root: Path) -> list[int]:
    """The agent's child that `--misbehave hang` starts, running under `root`."""
    return [pid for pid in working_in(root) if b"SIG_IGN" in _cmdline(pid)]


def _cmdline(pid: int) -> bytes:
    with contextlib.suppress(OSError):
        return Path(f"/proc/{pid}/cmdline").read_bytes()
    return b""


def test_the_next_start_sweeps_what_a_dead_t25_left():
    dead = subprocess.Popen([sys.executable, "-c", "pass"])
    dead.wait()
    env = {**os.environ, containment.TAG_ENV: f"{dead.pid}.R-9"}
    left = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"], env=env)
    alive = {**os.environ, containment.TAG_ENV: f"{os.getpid()}.R-10"}
    ours = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"], env=alive)
    try:
        wait_until(lambda: left.pid in dict(containment._tagged()), 10, "the leftover tagged")
        swept = containment.sweep_leftovers()
        assert left.pid in swept and ours.pid not in swept
        assert left.wait(timeout=10) == -signal.SIGKILL
        assert ours.poll() is None  # a live T25's run is never swept
    finally:
        for proc in (left, ours):
            if proc.poll() is None:
                proc.kill()
                proc.wait()


def test_the_doctor_says_how_runs_are_confined(shop, t25, tmp_path):
    (shop / "t25.yaml").write_text(json.dumps({"projects": [{"name": "shop", "repo": "."}]}))
    done = t25("doctor", cwd=shop)
    assert "sandbox: auto - bubblewrap confines every agent and QA check" in done.out
    alone = tmp_path / "python-alone"  # a PATH with the interpreter and no bubblewrap
    alone.mkdir()
    (alone / "python3").symlink_to(sys.executable)
    none = t25("doctor", cwd=shop, env={"PATH": f"{alone}:/nowhere"})
    assert "sandbox: auto - unconfined: agents run as you" in none.out, none.out


@pytest.mark.parametrize("sandbox", ["none", "auto"])
def test_every_start_that_runs_agents_unconfined_says_so(shop, t25, sandbox):
    config = {"projects": [{"name": "shop", "repo": "."}], "sandbox": sandbox}
    (shop / "t25.yaml").write_text(json.dumps(config))
    done = t25("run", cwd=shop)
    assert done.code == 0, done.err
    warned = "t25: warning: sandbox: none - unconfined: agents run as you" in done.err
    assert warned is (sandbox == "none"), done.err


async def test_sandboxed_a_link_out_of_the_worktree_is_still_caught_and_never_committed(env, shop):
    """The worktree is the agent's to write, links included: the second fence holds."""
    error = await failed_dev(env, "auto", dev("plant:symlink"))
    assert "symbolic link etc-link -> /etc leads outside the worktree" in error
    assert git_sync("log", "--format=%s", "feat/T-1", cwd=shop).splitlines() == [
        "tests",
        "initial",
    ]
    assert not os.path.lexists(shop / ".factory" / "worktrees" / "T-1" / "etc-link")
