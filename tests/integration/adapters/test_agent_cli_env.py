"""Environment hygiene and sandboxes, with real child processes (echo_cli.py reports what it
got): login variables pass, T25's secrets never do, a private HOME is fresh and removed, and a
sandbox that cannot be had refuses the run instead of running it unsandboxed."""

from __future__ import annotations

import asyncio
import itertools
import json
import shutil
import socket
import tempfile
from pathlib import Path

import pytest

from adapters.base import CliAdapter
from adapters.sandbox import Bubblewrap, Confinement, Docker, SandboxUnavailable, sandbox_for
from core.config.schema import AgentProfile
from core.domain.agent import Failure
from tests.support.agent_kit import EchoSpec, Sink


class LoginEcho(EchoSpec):
    name = "login-echo"
    login_env = ("ECHO_LOGIN_TOKEN",)
    home_files = {".echo/settings.json": '{"telemetry": false}'}

    def home_env(self, home: Path) -> dict[str, str]:
        return {"ECHO_CONFIG_DIR": str(home / ".echo")}


async def report_of(adapter: CliAdapter, request) -> tuple[dict, object]:
    sink = Sink()
    result = await adapter.run(request, sink, asyncio.Event())
    return json.loads(result.final_text) if result.ok else {}, result


async def test_login_variables_pass_and_t25_secrets_never_do(make_request, monkeypatch):
    monkeypatch.setenv("ECHO_LOGIN_TOKEN", "user-login")
    monkeypatch.setenv("MY_PROVIDER_KEY", "from-profile")
    monkeypatch.setenv("UNRELATED_SECRET", "nope")
    monkeypatch.setenv("FACTORY_WORKER_CREDENTIAL", "worker-secret")
    monkeypatch.setenv("T25_DATABASE_URL", "postgresql://u:pw@db/t25")
    request = make_request(
        env_passthrough=("MY_PROVIDER_KEY", "FACTORY_WORKER_CREDENTIAL", "T25_DATABASE_URL")
    )
    report, _ = await report_of(CliAdapter(LoginEcho()), request)
    env = report["env"]
    assert env["ECHO_LOGIN_TOKEN"] == "user-login" and env["MY_PROVIDER_KEY"] == "from-profile"
    assert "UNRELATED_SECRET" not in env
    assert "FACTORY_WORKER_CREDENTIAL" not in env and "T25_DATABASE_URL" not in env


def test_a_profile_cannot_pass_t25_secrets():
    for name in ("FACTORY_WORKER_CREDENTIAL", "T25_DATABASE_URL"):
        with pytest.raises(ValueError, match="never reaches an agent"):
            AgentProfile(adapter="claude", env_passthrough=[name])
    with pytest.raises(ValueError, match="sandbox_image"):
        AgentProfile(adapter="claude", sandbox="docker")


async def test_a_private_home_is_fresh_seeded_and_removed(make_request, monkeypatch, tmp_path):
    monkeypatch.setenv("T25_RUN_HOMES", str(tmp_path / "homes"))
    report, _ = await report_of(CliAdapter(LoginEcho()), make_request(private_home=True))
    home = Path(report["env"]["HOME"])
    assert home.parent == tmp_path / "homes" and home != Path.home()
    assert report["env"]["ECHO_CONFIG_DIR"] == str(home / ".echo")
    assert report["env"]["XDG_CONFIG_HOME"] == str(home / ".config")
    assert not home.exists()  # removed after the run
    report, _ = await report_of(CliAdapter(LoginEcho()), make_request())
    assert "ECHO_CONFIG_DIR" not in report["env"]


# -- sandboxes -------------------------------------------------------------------------------


async def _bwrap_usable() -> str | None:
    try:
        await Bubblewrap().check()
    except SandboxUnavailable as exc:
        return str(exc)
    return None


@pytest.mark.parametrize("network", ["none", "shared"])
async def test_bwrap_makes_only_the_worktree_writable_and_shares_the_network_unless_told(
    make_request, workdir, tmp_path, network
):
    reason = await _bwrap_usable()
    if reason:
        pytest.skip(f"bwrap cannot run here: {reason}")
    # Outside /tmp (the sandbox's /tmp is a private tmpfs): a real directory on the host.
    spot = Path(tempfile.mkdtemp(dir=Path.home()))
    outside = spot / "outside.txt"
    listener = socket.socket()
    listener.bind(("127.0.0.1", 0))
    listener.listen()
    port = listener.getsockname()[1]
    script = (
        "import socket, pathlib, json\n"
        "pathlib.Path('inside.txt').write_text('ok')\n"
        "out = {}\n"
        f"try:\n    pathlib.Path({str(outside)!r}).write_text('escaped'); out['outside'] = 'written'\n"
        "except OSError as e:\n    out['outside'] = type(e).__name__\n"
        f"try:\n    socket.create_connection(('127.0.0.1', {port}), timeout=2); out['net'] = 'open'\n"
        "except OSError as e:\n    out['net'] = type(e).__name__\n"
        "print(json.dumps(out))\n"
    )

    class Probe(EchoSpec):
        def build_argv(self, request, prompt):
            return ["-c", script]

        def parse(self, stdout):
            return super().parse(stdout)

    try:
        _, result = await report_of(
            CliAdapter(Probe()), make_request(sandbox="bwrap", network=network)
        )
    finally:
        listener.close()
        written = outside.exists()
        shutil.rmtree(spot)
    assert result.ok, result.error
    seen = json.loads(result.final_text)
    # The write outside the worktree was refused by the sandbox (the home is hidden: no such
    # directory; or read-only), and nothing reached the host's file.
    assert seen["outside"] in ("FileNotFoundError", "PermissionError", "OSError"), seen
    assert not written
    assert (seen["net"] == "open") is (network == "shared")
    assert (workdir / "inside.txt").read_text() == "ok"


async def test_a_sandbox_that_cannot_be_had_refuses_the_run(make_request, monkeypatch, tmp_path):
    marker = tmp_path / "ran"

    class Marker(EchoSpec):
        def build_argv(self, request, prompt):
            return ["-c", f"open({str(marker)!r}, 'w').write('ran')"]

    monkeypatch.setenv("PATH", str(tmp_path))  # no bwrap, no docker on this PATH
    for sandbox, image in (("bwrap", None), ("docker", "t25/agent:1")):
        result = await CliAdapter(Marker()).run(
            make_request(sandbox=sandbox, sandbox_image=image), Sink(), asyncio.Event()
        )
        assert result.failure is Failure.SPAWN
        assert f"sandbox {sandbox} cannot be had" in result.error and "refused" in result.error
    assert not marker.exists()


async def test_docker_without_an_engine_says_so(tmp_path, monkeypatch):
    fake = tmp_path / "docker"
    fake.write_text(
        "#!/bin/sh\necho 'Cannot connect to the Docker daemon at "
        "unix:///var/run/docker.sock. Is the docker daemon running?' >&2\nexit 1\n"
    )
    fake.chmod(0o755)
    monkeypatch.setenv("PATH", f"{tmp_path}:/usr/bin:/bin")
    with pytest.raises(SandboxUnavailable, match="no Docker engine answers: Cannot connect"):
        await Docker("t25/agent:1").check()


def test_docker_argv_has_no_network_and_mounts_the_worktree(tmp_path):
    cwd, home = tmp_path / "wt", tmp_path / "home"
    argv = sandbox_for("docker", image="t25/agent:1").wrap(
        ["/usr/local/bin/claude", "-p", "--", "--literal $(x)"],
        Confinement(worktree=cwd, home=home, network="none"),
        {"ANTHROPIC_API_KEY": "secret-value", "HOME": str(home)},
    )
    assert argv[1:3] == ["run", "--rm"]
    assert argv[argv.index("--network") + 1] == "none"
    assert f"{cwd}:{cwd}" in argv and f"{home}:{home}" in argv
    assert argv[argv.index("-w") + 1] == str(cwd)
    assert "ANTHROPIC_API_KEY" in argv and "secret-value" not in " ".join(argv)
    assert argv[-5:] == ["t25/agent:1", "claude", "-p", "--", "--literal $(x)"]


def test_bwrap_argv_mounts_the_worktree_last_over_what_it_hides(tmp_path):
    hidden = tmp_path / ".factory"
    worktree = hidden / "worktrees" / "T-1"
    worktree.mkdir(parents=True)
    prompt = tmp_path / "prompt.md"
    prompt.write_text("x")
    argv = Bubblewrap().wrap(
        ["/bin/agent", "x"],
        Confinement(worktree=worktree, readonly=[(prompt, prompt)], hidden=[hidden]),
        {},
    )
    assert argv[-3:] == ["--", "/bin/agent", "x"]
    for flag in ("--unshare-pid", "--die-with-parent", "--new-session"):
        assert flag in argv
    assert "--unshare-net" not in argv and "--unshare-all" not in argv
    pairs = list(itertools.pairwise(argv))
    assert pairs.index(("--tmpfs", str(hidden))) < pairs.index(("--bind", str(worktree)))
    assert pairs.index(("--bind", str(worktree))) < pairs.index(("--ro-bind", str(prompt)))
    # once the worktree is mounted in it (a covered key store of the HOME may follow it)
    assert pairs.index(("--remount-ro", str(hidden))) > pairs.index(("--bind", str(worktree)))


async def test_a_newer_cli_version_warns_and_still_runs(make_request, caplog):
    class Newer(EchoSpec):
        min_version, below_version, tested_version = "1.0.0", "2.0", "1.4.2"

    adapter = CliAdapter(Newer())
    with caplog.at_level("WARNING", logger="t25.adapters"):
        result = await adapter.run(make_request(), Sink(), asyncio.Event())
    assert result.ok and result.cli_version  # the Python running echo_cli.py: 3.x > 2.0
    assert adapter.warning and "newer than tested (1.4.2)" in adapter.warning
    assert "newer than tested" in caplog.text


async def test_a_sandboxed_cli_gets_its_login_read_only_in_a_private_home(
    make_request, monkeypatch, tmp_path
):
    reason = await _bwrap_usable()
    if reason:
        pytest.skip(f"bwrap cannot run here: {reason}")
    real_home = Path(tempfile.mkdtemp(dir=Path.home()))  # outside the sandbox's /tmp
    login = real_home / ".echo" / "creds.json"
    login.parent.mkdir()
    login.write_text('{"token": "the-login"}')
    monkeypatch.setenv("HOME", str(real_home))
    monkeypatch.setenv("T25_RUN_HOMES", str(real_home / "homes"))
    script = (
        "import json, os, pathlib\n"
        "creds = pathlib.Path(os.environ['HOME'], '.echo', 'creds.json')\n"
        "out = {'home': os.environ['HOME'], 'read': creds.read_text()}\n"
        "try:\n    creds.write_text('changed'); out['write'] = 'written'\n"
        "except OSError as e:\n    out['write'] = e.strerror\n"
        "print(json.dumps(out))\n"
    )

    class WithLogin(EchoSpec):
        login_files = (".echo/creds.json",)

        def build_argv(self, request, prompt):
            return ["-c", script]

    try:
        seen, result = await report_of(CliAdapter(WithLogin()), make_request(sandbox="bwrap"))
        assert result.ok, result.error
        assert seen["home"] != str(real_home)  # a private HOME, even without private_home
        assert seen["read"] == '{"token": "the-login"}'
        assert seen["write"] == "Read-only file system"
        assert login.read_text() == '{"token": "the-login"}'
        assert not list((real_home / "homes").iterdir())  # the private HOME is gone
    finally:
        shutil.rmtree(real_home)
