"""The rest of the wall, tried from inside a run, as root and as an unprivileged user: no
capability (the bind-mount-and-remount attack a root agent used is refused), the operator's
HOME hidden (none of 33 planted credential files readable, the toolchains still there),
and caps on a run's memory, processes and CPU time (the run fails naming the cap; the next
run goes on). The module runs as whoever runs the suite (root in CI) and again as an
unprivileged user (tests/integration/sandbox/test_wall_unprivileged.py).
"""

from __future__ import annotations

import asyncio
import os
import shutil
import subprocess
import sys
import tempfile
import venv as venv_module
from pathlib import Path

import pytest

from adapters import caps
from adapters.checks import run_check
from adapters.process import minimal_env, run_process
from adapters.sandbox import Bubblewrap, Confinement, bwrap_problem, probe
from core.config.policy_config import QACheck
from core.domain.agent import CheckSandbox, RunCaps
from core.domain.models import TaskState
from tests.support.sandbox import dev, inside

pytestmark = pytest.mark.skipif(
    bool(bwrap_problem()), reason=f"bubblewrap cannot run here: {bwrap_problem()}"
)
ROOT = os.geteuid() == 0


# -- no capability --------------------------------------------------------------------------


def test_the_probe_sees_no_capability_and_a_refused_mount():
    seen = probe()
    assert seen.problem is None, seen.problem
    assert int(seen.capabilities, 16) == 0 and seen.mount_refused and seen.own_network


@pytest.mark.parametrize("how", ["--symlinks", "--copies"])
def test_the_probe_works_for_a_t25_installed_under_tmp(tmp_path, how):
    """A checkout cloned under /tmp, its virtualenv inside: the probe's fresh /tmp must not
    hide the interpreter it runs (a link to the base one, or a copy under /tmp)."""
    venv = tmp_path / "venv"
    subprocess.run([sys.executable, "-m", "venv", how, "--without-pip", venv], check=True)
    look = "from adapters.sandbox import bwrap_problem; print(bwrap_problem())"
    done = subprocess.run(
        [venv / "bin" / "python", "-c", look],
        env={**os.environ, "PYTHONPATH": os.pathsep.join(sys.path)},  # T25 and its libraries
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert done.stdout.strip() == "None", done.stdout + done.stderr


async def test_a_program_whose_interpreter_lives_under_tmp_starts(tmp_path):
    """An agent launched by a script whose `#!` names a virtualenv's python under /tmp (in a
    /tmp directory of its own, not on PATH): the fresh /tmp must not hide the interpreter."""
    venv = tmp_path / "venv"
    venv_module.create(venv, with_pip=False, symlinks=True)
    elsewhere = Path(tempfile.mkdtemp(dir="/var/tmp"))  # the script itself is not under /tmp
    try:
        program = elsewhere / "agent"
        program.write_text(f"#!{venv}/bin/python\nimport sys\nprint('started on', sys.prefix)\n")
        program.chmod(0o755)
        tree = tmp_path / "tree"
        tree.mkdir()
        box = Confinement(worktree=tree)
        done = await run_process(
            Bubblewrap().wrap([str(program)], box, {}),
            cwd=tree,
            env=minimal_env(),
            timeout_s=60,
            abort=asyncio.Event(),
        )
    finally:
        shutil.rmtree(elsewhere)
    out = done.log.decode("utf-8", "replace")
    assert done.exit_code == 0 and f"started on {venv}" in out, out


async def test_the_remount_attack_is_refused_and_the_host_stays_unwritten(tmp_path):
    target = tmp_path / "host-file.txt"
    target.write_text("the operator's\n")
    script = f"""
import subprocess
for line in open("/proc/self/status"):
    if line.startswith(("CapEff", "CapPrm", "CapAmb")):
        print(line.strip())
steps = [
    ["mkdir", "-p", "/tmp/h"],
    ["mount", "--bind", "/", "/tmp/h"],
    ["mount", "-o", "remount,bind,rw", "/tmp/h"],
    ["mount", "-o", "remount,rw", "/"],
    ["sh", "-c", "echo pwned > /tmp/h{target}"],
    ["sh", "-c", "echo pwned > {target}"],
]
for step in steps:
    print(step[1], subprocess.run(step, capture_output=True).returncode)
"""
    out, code = await inside(script, tmp_path / "tree")
    assert code == 0, out
    assert "CapEff:\t0000000000000000" in out and "CapPrm:\t0000000000000000" in out, out
    lines = dict(
        line.split(" ", 1) for line in out.splitlines() if line.startswith(("--", "-o", "-c"))
    )
    assert lines["--bind"] != "0" and lines["-o"] != "0", out
    assert target.read_text() == "the operator's\n"


# -- the operator's HOME --------------------------------------------------------------------

# What an attacker looks for in a developer's HOME: key stores, other CLIs' logins, cloud
# credentials, shell histories (a token typed on a command line sits there), other
# repositories' .env files.
CREDENTIALS = (
    ".ssh/id_ed25519",
    ".ssh/id_rsa",
    ".gnupg/private-keys-v1.d/0A1B.key",
    ".aws/credentials",
    ".azure/msal_token_cache.json",
    ".kube/config",
    ".docker/config.json",
    ".config/gh/hosts.yml",
    ".netrc",
    ".pgpass",
    ".git-credentials",
    ".npmrc",
    ".pypirc",
    ".claude/.credentials.json",
    ".claude.json",
    ".codex/auth.json",
    ".gemini/oauth_creds.json",
    ".local/share/opencode/auth.json",
    ".aider/oauth-keys.env",
    ".config/gcloud/credentials.db",
    ".config/gcloud/application_default_credentials.json",
    ".bash_history",
    ".zsh_history",
    ".python_history",
    ".psql_history",
    "projects/billing/.env",
    "src/api/.env.production",
    ".terraform.d/credentials.tfrc.json",
    ".vault-token",
    ".m2/settings.xml",
    ".gradle/gradle.properties",
    ".cargo/credentials.toml",
    ".gem/credentials",
)


@pytest.fixture
def planted_home(tmp_path, monkeypatch) -> Path:
    """An operator's HOME holding 33 credential files and a toolchain."""
    assert len(CREDENTIALS) == 33
    home = tmp_path / "operator"
    for name in CREDENTIALS:
        path = home / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(f"SECRET-{name}\n")
    tool = home / ".cargo" / "bin" / "tool"
    tool.parent.mkdir(parents=True, exist_ok=True)
    tool.write_text("#!/bin/sh\necho toolchain-ran\n")
    tool.chmod(0o755)
    monkeypatch.setenv("HOME", str(home))
    return home


async def test_none_of_33_credential_files_in_the_operators_home_is_readable(
    tmp_path, planted_home
):
    paths = [str(planted_home / name) for name in CREDENTIALS]
    script = f"""
import os, subprocess
for path in {paths!r}:
    try:
        text = open(path).read()
    except OSError as exc:
        text = type(exc).__name__
    print("READ" if "SECRET" in text else "hidden", path)
print(subprocess.run([{str(planted_home / ".cargo/bin/tool")!r}], capture_output=True, text=True).stdout.strip())
print("root", sorted(os.listdir("/root")) if os.path.isdir("/root") else "absent")
"""
    out, code = await inside(script, tmp_path / "tree")
    assert code == 0, out
    read = [line for line in out.splitlines() if line.startswith("READ")]
    assert read == [], read
    assert sum(line.startswith("hidden") for line in out.splitlines()) == 33
    assert "toolchain-ran" in out  # given back: the toolchains under HOME still run


async def test_a_read_path_is_given_back_and_nothing_beside_it(tmp_path, planted_home):
    shared = planted_home / "datasets"
    shared.mkdir()
    (shared / "corpus.txt").write_text("public data\n")
    script = f"""
for path in ({str(shared / "corpus.txt")!r}, {str(planted_home / ".bash_history")!r}):
    try:
        print(open(path).read().strip())
    except OSError as exc:
        print(type(exc).__name__)
try:
    open({str(shared / "new.txt")!r}, "w")
    print("wrote")
except OSError as exc:
    print("refused", type(exc).__name__)
"""
    out, code = await inside(script, tmp_path / "tree", read_paths=(shared,))
    assert code == 0, out
    assert "public data" in out and "SECRET" not in out and "refused" in out, out


# -- a run's resources ----------------------------------------------------------------------

CAPS = RunCaps(memory_mib=256, processes=64, cpu_s=2)
GROUPED = caps.backend().kind != "rlimit"  # the whole run is counted: the cap is named


async def _check(tmp_path: Path, name: str, code: str):
    tree = tmp_path / "tree"
    tree.mkdir(exist_ok=True)
    check = QACheck(name=name, run=[sys.executable, "-c", code], timeout_s=60)
    confine = CheckSandbox(kind="auto", caps=CAPS, run_id=f"R-{name}")
    return await run_check(check, tree, None, confine)


async def test_a_run_past_its_memory_cap_fails_and_the_machine_is_unharmed(tmp_path):
    result = await _check(tmp_path, "memory", "b = bytearray(2 << 30)\nprint('held 2 GiB')")
    assert not result.passed and "held 2 GiB" not in result.excerpt, result.excerpt
    if GROUPED:
        assert "memory cap reached: 256 MiB (limits.run_memory_mib)" in result.excerpt
    else:
        assert "MemoryError" in result.excerpt, result.excerpt
    after = await _check(tmp_path, "after", "print('next run fine')")
    assert after.passed and "next run fine" in after.excerpt


async def test_a_run_past_its_process_cap_is_refused_more(tmp_path):
    code = (
        "import os, time\n"
        "kids = 0\n"
        "for i in range(300):\n"
        "    try:\n"
        "        pid = os.fork()\n"
        "    except OSError:\n"
        "        break\n"
        "    if pid == 0:\n"
        "        time.sleep(20)\n"
        "        os._exit(0)\n"
        "    kids += 1\n"
        "print('forked', kids)\n"
    )
    result = await _check(tmp_path, "processes", code)
    forked = int(result.excerpt.split("forked ")[1].split()[0])
    if GROUPED:
        assert forked < 64 and not result.passed, result.excerpt
        assert "process cap reached: 64 (limits.run_processes)" in result.excerpt
    elif not ROOT:  # per user: the run's share on top of what the user already runs
        assert forked < 300, result.excerpt
    else:
        pytest.skip("root with no cgroup has no process cap (t25 doctor says so)")


async def test_a_run_past_its_cpu_time_cap_is_stopped_naming_it(tmp_path):
    result = await _check(tmp_path, "cpu", "while True:\n    pass\n")
    assert not result.passed
    assert "CPU time cap reached: 2 s per process (limits.run_cpu_s)" in result.excerpt


async def test_an_agent_past_its_memory_cap_fails_the_task_naming_the_cap(env):
    limits = {"run_memory_mib": 256}
    await env.open(roles=dev("hog:1024"), limits=limits, sandbox="auto")
    task = await env.new()
    await env.work()
    task = await env.task(task.id)
    assert task.state is TaskState.FAILED, task.state
    if GROUPED:
        assert "memory cap reached: 256 MiB (limits.run_memory_mib)" in task.error, task.error
    else:
        assert "MemoryError" in task.error, task.error


async def test_a_change_adding_a_file_over_max_file_bytes_fails_policy(env):
    await env.open(roles=dev("bigfile:3000000"), limits={"max_file_bytes": 1_000_000})
    task = await env.new()
    await env.work()
    task = await env.task(task.id)
    assert task.state is TaskState.FAILED, task.state
    assert "a file of 3,000,000 bytes, big.bin (limits.max_file_bytes 1,000,000)" in task.error


async def test_a_sandbox_that_leaves_a_capability_is_no_sandbox(monkeypatch):
    # The probe sees what a run would get. Without --cap-drop, bubblewrap started by root
    # leaves the sandboxed process root's capabilities: `required` then refuses the run and
    # `auto` would run unconfined, saying why. Started by a user, bubblewrap drops them
    # itself, and the sandbox stands.
    from adapters import sandbox, sandbox_probe
    from adapters.sandbox import SandboxUnavailable, sandbox_for, unconfined_reason

    monkeypatch.setattr(sandbox, "ISOLATION", ("--unshare-pid",))
    sandbox_probe._probe.cache_clear()
    try:
        if not ROOT:
            assert probe().problem is None and unconfined_reason("auto") is None
            return
        assert "leaves capabilities inside the sandbox" in (probe().problem or "")
        with pytest.raises(SandboxUnavailable, match="an agent could remount the host"):
            await sandbox_for("required").check()
        assert "leaves capabilities" in (unconfined_reason("auto") or "")
    finally:
        sandbox_probe._probe.cache_clear()
