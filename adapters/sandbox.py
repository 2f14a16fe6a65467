"""Sandbox providers: one small interface that wraps an agent's argv in an isolated runner.

    sandbox_for("none" | "bwrap" | "docker", image=...) -> Sandbox
    await sandbox.check()          raises SandboxUnavailable with the reason it cannot be had
    sandbox.wrap(argv, cwd=..., env=..., writable=[...], readable=[...]) -> argv
    sandbox.env(env)               the environment the wrapper itself is started with

`bwrap` (bubblewrap) runs the CLI with every namespace unshared - the network among them -
the whole filesystem read-only, a private /tmp, and only the worktree (and a private HOME,
when the profile has one) writable. `docker` runs it with `docker run --network none` and
the worktree bind-mounted at the same path. A profile that asks for a sandbox that cannot
be had fails its run: T25 never runs it unsandboxed instead.
"""

from __future__ import annotations

import asyncio
import os
import shutil
import tempfile
from collections.abc import Sequence
from pathlib import Path

from adapters.process import run_process

CHECK_TIMEOUT_S = 10.0


class SandboxUnavailable(Exception):
    """The sandbox a profile asks for cannot be had here; the message says why."""


class Sandbox:
    """No sandbox: the argv runs as it is."""

    name = "none"

    async def check(self) -> None:
        return None

    def wrap(
        self,
        argv: list[str],
        *,
        cwd: Path,
        env: dict[str, str],
        writable: Sequence[Path] = (),
        readable: Sequence[Path] = (),
    ) -> list[str]:
        return argv

    def env(self, env: dict[str, str]) -> dict[str, str]:
        return env


async def _probe(argv: list[str]) -> tuple[int | None, str]:
    """Run a short probe; (exit code, its output), exit code None when it could not start or
    did not answer. It runs under `run_process`, so a stopped probe leaves no child behind."""
    done = await run_process(
        argv,
        cwd=Path(tempfile.gettempdir()),
        env=dict(os.environ),
        timeout_s=CHECK_TIMEOUT_S,
        abort=asyncio.Event(),
        grace_s=0.5,
        log_limit=65536,
    )
    if done.spawn_error:
        return None, done.spawn_error
    if done.timed_out:
        return None, f"no answer within {CHECK_TIMEOUT_S:g} s"
    return done.exit_code, done.log.decode("utf-8", "replace").strip()


class Bubblewrap(Sandbox):
    """bwrap: network off, everything read-only but the worktree and a private HOME."""

    name = "bwrap"

    def __init__(self) -> None:
        self._checked = False

    async def check(self) -> None:
        if self._checked:
            return
        path = shutil.which("bwrap")
        if path is None:
            raise SandboxUnavailable("bwrap is not installed (Debian: apt-get install bubblewrap)")
        code, out = await _probe(
            [
                path,
                "--unshare-all",
                "--ro-bind",
                "/",
                "/",
                "--dev",
                "/dev",
                "--proc",
                "/proc",
                "--",
                "true",
            ]
        )
        if code != 0:
            raise SandboxUnavailable(
                f"bwrap cannot create its namespaces here: "
                f"{out.splitlines()[-1] if out else 'exit ' + str(code)} "
                "(are unprivileged user namespaces disabled?)"
            )
        self._checked = True

    def wrap(
        self,
        argv: list[str],
        *,
        cwd: Path,
        env: dict[str, str],
        writable: Sequence[Path] = (),
        readable: Sequence[Path] = (),
    ) -> list[str]:
        bwrap = shutil.which("bwrap") or "bwrap"
        out = [
            bwrap,
            "--die-with-parent",
            "--unshare-all",
            "--new-session",
            "--ro-bind",
            "/",
            "/",
            "--dev",
            "/dev",
            "--proc",
            "/proc",
            "--tmpfs",
            "/tmp",
        ]
        for path in (*readable, *_hidden_by_tmpfs(argv[0])):
            out += ["--ro-bind", str(path), str(path)]
        for path in (cwd, *writable):
            out += ["--bind", str(path), str(path)]
        return [*out, "--chdir", str(cwd), "--", *argv]


def _hidden_by_tmpfs(program: str) -> list[Path]:
    """The fresh /tmp would hide a CLI installed under /tmp (a checkout or virtualenv there):
    give back, read-only, the top-level /tmp directory it lives in."""
    places = {Path(os.path.abspath(program)), Path(os.path.realpath(program))}
    return sorted(
        {
            Path("/tmp", path.parts[2])
            for path in places
            if path.is_relative_to("/tmp") and len(path.parts) > 2
        }
    )


class Docker(Sandbox):
    """docker run --network none, the worktree bind-mounted at its own path."""

    name = "docker"

    def __init__(self, image: str | None) -> None:
        self.image = image

    async def check(self) -> None:
        if not self.image:
            raise SandboxUnavailable("sandbox: docker needs sandbox_image in the profile")
        path = shutil.which("docker")
        if path is None:
            raise SandboxUnavailable("the docker CLI is not installed")
        code, out = await _probe([path, "version", "--format", "{{.Server.Version}}"])
        if code != 0:
            last = out.splitlines()[-1] if out else f"exit {code}"
            raise SandboxUnavailable(f"no Docker engine answers: {last}")

    def wrap(
        self,
        argv: list[str],
        *,
        cwd: Path,
        env: dict[str, str],
        writable: Sequence[Path] = (),
        readable: Sequence[Path] = (),
    ) -> list[str]:
        out = [
            shutil.which("docker") or "docker",
            "run",
            "--rm",
            "-i",
            "--network",
            "none",
            "--user",
            f"{os.getuid()}:{os.getgid()}",
            "--security-opt",
            "no-new-privileges",
            "-v",
            f"{cwd}:{cwd}",
            "-w",
            str(cwd),
        ]
        for path in writable:
            out += ["-v", f"{path}:{path}"]
        for path in readable:
            out += ["-v", f"{path}:{path}:ro"]
        for name in sorted(env):  # names only: values travel in docker's own environment
            out += ["-e", name]
        # Inside the image the CLI is found on the image's PATH, not the host's.
        return [*out, self.image or "", os.path.basename(argv[0]), *argv[1:]]

    def env(self, env: dict[str, str]) -> dict[str, str]:
        return env


def sandbox_for(name: str, *, image: str | None = None) -> Sandbox:
    """The provider a profile's `sandbox:` names."""
    if name == "bwrap":
        return Bubblewrap()
    if name == "docker":
        return Docker(image)
    if name == "none":
        return Sandbox()
    raise SandboxUnavailable(f"unknown sandbox {name!r} (known: none, bwrap, docker)")
