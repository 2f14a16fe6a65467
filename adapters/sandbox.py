"""Sandbox providers: one small interface that wraps an agent's or a QA check's argv.

    sandbox_for("auto" | "required" | "bwrap" | "docker" | "none", image=...) -> Sandbox
    await sandbox.check()          raises SandboxUnavailable with the reason it cannot be had
    sandbox.wrap(argv, Confinement(...)) -> argv
    sandbox.unconfined             why this run is not confined, or None when it is

`bwrap` (bubblewrap) is the default on Linux (`auto` picks it whenever it can run). Inside it
the whole filesystem is read-only; the task's worktree, the run's private HOME and a private
`/tmp` and `/run` are writable; T25's state (`.factory/`: the store, the audit log, other
tasks' worktrees, other runs' homes) and the user's key stores are covered by an empty
read-only directory; every user's home (HOME, /root, /home) is an empty one, in which the
toolchains, the programs on PATH and the repository are given back read-only; the
repository's shared `.git` is read-only, so the agent's own `git add` and `git commit` fail
(T25 commits the worktree after the run either way). The run holds no capability, whoever
runs T25 (root included: no mount, no remount). It has a PID namespace of its own (T25's
processes and their `/proc` are out of sight, and every descendant dies with the namespace,
even when T25 is SIGKILLed) and a new session (no TIOCSTI into the operator's terminal).

The network: `allowlist` (the default) gives the run a network namespace of its own whose
only way out is T25's proxy (adapters.netproxy), reached through a Unix socket and a bridge
on the sandbox's loopback (adapters.netbridge); `none` the namespace alone; `shared` the
host's network, loopback services included.

`auto` without a usable bubblewrap runs unconfined and says why (`unconfined`); `required`
and a profile's explicit `bwrap` refuse instead. `docker` runs the CLI with `docker run`, the
worktree bind-mounted at its own path, in the profile's `sandbox_image`.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import pwd
import shutil
import stat
import sys
import tempfile
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from adapters import sandbox_probe
from adapters.checkout_view import git_common_dir
from adapters.containment import reaped
from adapters.process import run_process
from core.workspace.real_paths import real_path

if TYPE_CHECKING:
    from adapters.checkout_view import CheckoutView

CHECK_TIMEOUT_S = 10.0
# The isolation of every bubblewrap sandbox, the probe's too (adapters.sandbox_probe checks it
# from inside). `--cap-drop ALL`: started by root, bubblewrap otherwise leaves the run every
# capability, CAP_SYS_ADMIN among them (mount, remount read-write).
ISOLATION = ("--unshare-pid", "--unshare-ipc", "--unshare-uts", "--cap-drop", "ALL")
KINDS = ("auto", "required", "bwrap", "docker", "none")

# Key stores in the user's HOME that no agent needs: covered inside the sandbox.
HOME_SECRETS = (
    *(".ssh", ".gnupg", ".aws", ".azure", ".kube", ".docker", ".config/gh"),
    *(".netrc", ".pgpass", ".git-credentials", ".npmrc", ".pypirc"),
)
# Host daemons' sockets live here (Postgres, Docker, D-Bus, the user's agents): a fresh
# tmpfs hides them. `/etc/resolv.conf` may point into it; that one file is kept.
RUNTIME_DIRS = ("/run", "/var/run")
# The usual per-user toolchain locations (relative to HOME): given back read-only inside
# the hidden home, so the compilers and interpreters installed there still run.
TOOLCHAINS = (
    *(".cargo", ".rustup", ".pyenv", ".nvm", ".volta", ".bun", ".deno", ".sdkman"),
    *(".rbenv", ".asdf", ".goenv", ".ghcup", ".opam", ".juliaup", "go", "bin"),
    *(".local/bin", ".local/lib", ".local/share/mise", ".local/share/pnpm", ".npm-global"),
)
# Credentials kept inside a toolchain's folder, covered when the folder is given back.
TOOLCHAIN_SECRETS = ("credentials", "credentials.toml", ".credentials.toml")


class SandboxUnavailable(Exception):
    """The sandbox a profile asks for cannot be had here; the message says why."""


@dataclass(frozen=True)
class Confinement:
    """What one run may touch: its worktree and private HOME read-write, `readonly` files
    bound in (host path, path inside), `hidden` directories covered, the network shared or
    not."""

    worktree: Path
    home: Path | None = None
    readonly: Sequence[tuple[Path, Path]] = ()
    hidden: Sequence[Path] = ()
    network: str = "shared"  # shared | none | allowlist
    # network: allowlist - the socket of the run's proxy (adapters.netproxy) and the loopback
    # ports it forwards (the allowlist's local endpoints, adapters.netbridge).
    proxy: Path | None = None
    forwards: tuple[int, ...] = ()
    # Given back read-only inside the hidden homes (the toolchains, sandbox.read_paths).
    read_paths: Sequence[Path] = ()
    worktree_writable: bool = True  # False: a role that changes no file
    # The tree seen at the main checkout's path, where the project's tooling expects it
    # (adapters.checkout_view); None: at its own path.
    view: CheckoutView | None = None

    @property
    def cwd(self) -> Path:
        """Where the run starts, inside."""
        return self.view.checkout if self.view is not None else self.worktree


class Sandbox:
    """No sandbox: the argv runs under the reaper (`adapters.containment`), which is all
    that keeps its processes in hand."""

    name = "none"
    unconfined: str | None = "sandbox: none"
    # Whether a run's processes all end with its first one, in a PID namespace of their own:
    # after a run that ended by itself none is left for its tag to find (adapters.containment).
    ends_its_processes = False

    async def check(self) -> None:
        return None

    def network(self, asked: str) -> str:
        """The network a run that asked for `asked` gets here: the allowlist needs a network
        namespace of the run's own, which only bubblewrap gives; elsewhere it is shared."""
        return "shared" if asked == "allowlist" else asked

    def wrap(self, argv: list[str], confinement: Confinement, env: Mapping[str, str]) -> list[str]:
        return reaped(argv, env)


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
    """bwrap: everything read-only but the worktree, a private HOME and /tmp; T25's state
    and the users' homes hidden; no capabilities; a PID namespace and a session of its own;
    a network namespace of its own unless the network is shared."""

    name = "bwrap"
    unconfined = None
    ends_its_processes = True  # --unshare-pid: the namespace dies with the run's first process

    async def check(self) -> None:
        problem = await asyncio.to_thread(bwrap_problem)
        if problem:
            raise SandboxUnavailable(problem)

    def network(self, asked: str) -> str:
        return asked

    def wrap(self, argv: list[str], confinement: Confinement, env: Mapping[str, str]) -> list[str]:
        bwrap = shutil.which("bwrap") or "bwrap"
        own_network = confinement.network in ("none", "allowlist")
        return [
            bwrap,
            "--die-with-parent",
            "--new-session",
            *ISOLATION,
            "--unshare-cgroup-try",
            *(["--unshare-net"] if own_network else []),
            *mount_plan(argv, confinement),
            "--chdir",
            str(confinement.cwd),
            "--",
            *bridged(argv, confinement),
        ]


# Where a run's network bridge finds T25's proxy, inside the sandbox (a fresh /run).
BRIDGE = Path(__file__).with_name("netbridge.py")
BRIDGE_INSIDE = "/run/t25-bridge.py"
PROXY_DIR_INSIDE = "/run/t25-net"
PROXY_PORT = 3128  # on the sandbox's own loopback: nothing else listens there


def bridged(argv: list[str], confinement: Confinement) -> list[str]:
    """`argv` behind the bridge to the run's proxy when it has one (network: allowlist)."""
    if confinement.network != "allowlist" or confinement.proxy is None:
        return argv
    port = PROXY_PORT
    while port in confinement.forwards:
        port += 1
    return [
        _interpreter(),
        "-I",
        "-S",
        BRIDGE_INSIDE,
        f"{PROXY_DIR_INSIDE}/{confinement.proxy.name}",
        str(port),
        *map(str, confinement.forwards),
        "--",
        *argv,
    ]


def _interpreter() -> str:
    """The interpreter the bridge runs on: T25's own, by its real path (a virtualenv's
    `python` is a link to it)."""
    return real_path(sys.executable)


def mount_plan(argv: list[str], confinement: Confinement) -> list[str]:
    """bwrap's mount arguments, in order: each later mount lies over the earlier ones."""
    out = ["--ro-bind", "/", "/", "--dev", "/dev", "--proc", "/proc", "--tmpfs", "/tmp"]
    out += _runtime_dirs()
    # The users' homes are empty (and what is written there is gone with the run); what a
    # run needs from them - its programs, the toolchains, the repository - is given back
    # read-only below. The fresh /tmp hides programs and a repository there: the same.
    homes = hidden_homes()
    for home in homes:
        out += ["--tmpfs", str(home)]
    worktree = confinement.worktree
    program = _program_files(argv[0])  # read once: both what /tmp and the homes give back
    given = [*_under_tmp(program, confinement), *_repository(worktree, confinement.view)]
    given += _from_homes(program, confinement, homes)
    for path in _outermost(given):
        out += ["--ro-bind", str(path), str(path)]
    covered = []
    for path in (*confinement.hidden, *_home_secrets(given)):
        try:
            mode = os.stat(path).st_mode  # once: most of these paths do not exist
        except OSError:
            continue
        if stat.S_ISDIR(mode):
            out += ["--tmpfs", str(path)]
            covered.append(path)
        elif stat.S_ISREG(mode):
            out += ["--ro-bind", "/dev/null", str(path)]
    out += [
        "--bind" if confinement.worktree_writable else "--ro-bind",
        str(worktree),
        str(worktree),
    ]
    if (worktree / ".git").exists():  # where the worktree's repository is: not the agent's
        out += ["--ro-bind", str(worktree / ".git"), str(worktree / ".git")]
    if confinement.home is not None:
        out += ["--bind", str(confinement.home), str(confinement.home)]
    for source, inside in confinement.readonly:
        if source.exists():
            out += ["--ro-bind", str(source), str(inside)]
    if confinement.network == "allowlist" and confinement.proxy is not None:
        out += ["--ro-bind", str(confinement.proxy.parent), PROXY_DIR_INSIDE]
        out += ["--ro-bind", str(BRIDGE), BRIDGE_INSIDE]
    # Last, once the mounts inside them are made: a write to a covered directory fails.
    for path in covered:
        out += ["--remount-ro", str(path)]
    if confinement.view is not None:  # over everything, the covered checkout's state too
        out += confinement.view.mounts(worktree, writable=confinement.worktree_writable)
    return out


def hidden_homes() -> list[Path]:
    """Every user's home as a run must not see it: the operator's (HOME, and the account's),
    /root and /home - the outermost of them, never `/` itself."""
    found = [Path(os.path.expanduser("~")), Path("/root"), Path("/home")]
    with contextlib.suppress(KeyError):
        found.append(Path(pwd.getpwuid(os.getuid()).pw_dir))
    real = [Path(real_path(p)) for p in found]
    return _outermost(p for p in real if p.is_dir() and p != Path("/"))


def _outermost(paths: Iterable[Path]) -> list[Path]:
    """The paths with none below another of them, sorted."""
    out: list[Path] = []
    for path in sorted(set(paths)):
        if not any(path.is_relative_to(kept) for kept in out):
            out.append(path)
    return out


def _from_homes(program: list[str], confinement: Confinement, homes: list[Path]) -> list[Path]:
    """What a run needs that lies in a hidden home, to give back read-only: the toolchains
    (`TOOLCHAINS` and `sandbox.read_paths`), the directories on PATH, the
    program's own installation (a link's target too, its `#!` interpreter's) and the
    interpreter of T25's bridge."""
    # In strings, each spelled as pathlib would (no doubled or trailing slash): pathlib's
    # own joins and comparisons made this a third of a run's setup (~4 ms).
    home = str(_home())
    wanted = [*(os.path.join(home, name) for name in TOOLCHAINS), *map(str, confinement.read_paths)]
    wanted += [str(Path(p)) for p in _path_dirs()]
    found = (*program, _interpreter())
    wanted += [*(str(_prefix(Path(p))) for p in found), str(Path(sys.base_prefix))]
    inside_a_home = tuple(f"{top}/" for top in homes)
    out = []
    for named in wanted:
        if not os.path.exists(named):
            continue  # nor is its real path there: most toolchains are not installed
        out += [
            Path(candidate)
            for candidate in dict.fromkeys((named, real_path(named)))
            if candidate.startswith(inside_a_home)
        ]
    return out


def _program_files(program: str) -> list[str]:
    """The program by its path and its real path, and so its `#!` interpreter (`#!/usr/bin/env
    NAME`: NAME as PATH finds it): a script whose interpreter is hidden cannot start."""
    found = [os.path.abspath(program), real_path(program)]
    try:
        with open(program, "rb") as file:
            first = file.read(256).split(b"\n", 1)[0]
    except OSError:
        return found
    if not first.startswith(b"#!"):
        return found
    words = first[2:].decode("utf-8", "replace").split()
    if words and os.path.basename(words[0]) == "env":
        named = next((w for w in words[1:] if not w.startswith("-") and "=" not in w), None)
        words = [shutil.which(named) or named] if named else []
    if words and os.path.isabs(words[0]):
        found += [os.path.abspath(words[0]), real_path(words[0])]
    return found


def _prefix(program: Path) -> Path:
    """Where a program is installed: the folder above its `bin/`, else its own folder."""
    folder = program.parent
    return folder.parent if folder.name == "bin" else folder


def _path_dirs() -> list[str]:
    return [p for p in os.environ.get("PATH", "").split(os.pathsep) if os.path.isabs(p)]


def _repository(worktree: Path, view: CheckoutView | None = None) -> list[Path]:
    """The main checkout a linked worktree belongs to (its shared `.git` inside), or the
    bare repository: read-only inside, like everything else. A run seen at its checkout's
    path has read it already: its view's checkout."""
    if view is not None:
        return [view.checkout]
    common = git_common_dir(worktree)
    if common is None:
        return []
    return [common.parent if common.name == ".git" else common]


def _runtime_dirs() -> list[str]:
    out: list[str] = []
    for where in RUNTIME_DIRS:
        path = Path(where)
        if path.is_dir() and not path.is_symlink():
            out += ["--tmpfs", where]
    resolv = Path("/etc/resolv.conf")
    target = Path(os.path.realpath(resolv))
    if resolv.is_symlink() and target.is_file() and target.is_relative_to("/run"):
        out += ["--ro-bind", str(target), str(target)]
    return out


def _under_tmp(program: list[str], confinement: Confinement) -> list[Path]:
    """The top-level /tmp directories the program, its `#!` interpreter and its PATH live in, and the
    `sandbox.read_paths` there, to give back read-only over the private /tmp."""
    places = [Path(p) for p in program]
    places += [Path(p) for p in os.environ.get("PATH", "").split(os.pathsep) if p]
    places += [source for source, _ in confinement.readonly]
    tmp = Path("/tmp")
    tops = {
        Path("/tmp", path.parts[2])
        for path in places
        if path.is_absolute() and path.is_relative_to(tmp) and len(path.parts) > 2
    }
    given = {path for path in confinement.read_paths if path.is_relative_to(tmp) and path.exists()}
    return sorted(tops | given)


def _home() -> Path:
    return Path(os.path.expanduser("~"))


def _home_secrets(given: Iterable[Path] = ()) -> list[Path]:
    """The key stores in HOME, and the credentials the toolchains given back keep inside
    them (crates.io's token in ~/.cargo, RubyGems' in ~/.gem)."""
    inside = [p / name for p in given for name in TOOLCHAIN_SECRETS]
    home = _home()
    return [*(home / name for name in HOME_SECRETS), *inside]


def probe() -> sandbox_probe.SandboxProbe:
    """What bubblewrap gives a run here, isolated as every run is (`ISOLATION`)."""
    return sandbox_probe.probe(ISOLATION)


def bwrap_problem() -> str | None:
    """Why bubblewrap cannot confine a run here, or None when it can."""
    return probe().problem


class Unconfined(Sandbox):
    """`auto` where bubblewrap cannot run: the argv runs as it is, and says why."""

    def __init__(self, reason: str) -> None:
        self.unconfined = f"unconfined: agents run as you ({reason})"


class Docker(Sandbox):
    """docker run, the worktree bind-mounted at its own path."""

    name = "docker"
    unconfined = None

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

    def wrap(self, argv: list[str], confinement: Confinement, env: Mapping[str, str]) -> list[str]:
        cwd = confinement.worktree
        network = "none" if confinement.network == "none" else "host"
        out = [
            shutil.which("docker") or "docker",
            "run",
            "--rm",
            "-i",
            "--network",
            network,
            "--user",
            f"{os.getuid()}:{os.getgid()}",
            "--security-opt",
            "no-new-privileges",
            "-v",
            f"{cwd}:{cwd}",
            "-w",
            str(cwd),
        ]
        if confinement.home is not None:
            out += ["-v", f"{confinement.home}:{confinement.home}"]
        for source, inside in confinement.readonly:
            out += ["-v", f"{source}:{inside}:ro"]
        for name in sorted(env):  # names only: values travel in docker's own environment
            out += ["-e", name]
        # Inside the image the CLI is found on the image's PATH, not the host's.
        return [*out, self.image or "", os.path.basename(argv[0]), *argv[1:]]


def unconfined_reason(mode: str) -> str | None:
    """Why runs under the project's `sandbox.mode` are not confined here, or None when
    they are (`required` where bubblewrap cannot run refuses them instead: not unconfined)."""
    if mode == "none":
        return "sandbox: none in t25.yaml"
    return bwrap_problem() if mode == "auto" else None


def confines(name: str) -> bool:
    """Whether a run under the sandbox setting `name` gets bubblewrap here, as `sandbox_for`
    gives it (where bubblewrap cannot run, `bwrap` and `required` refuse the run): known
    before the run starts."""
    try:
        return isinstance(sandbox_for(name), Bubblewrap)
    except SandboxUnavailable:  # a setting T25 does not know: watched, as unconfined
        return False


def describe(mode: str, network: str) -> str:
    """How agents and QA checks are confined, in one line: `t25 doctor`, and every start."""
    if reason := unconfined_reason(mode):
        return f"sandbox: {mode} - unconfined: agents run as you ({reason})"
    if mode == "required" and (problem := bwrap_problem()):
        return f"sandbox: required - cannot run here: {problem}; no run will start"
    return f"sandbox: {mode} - bubblewrap confines every agent and QA check; network {network}"


def sandbox_for(name: str, *, image: str | None = None) -> Sandbox:
    """The provider a run's sandbox setting names. `auto` is bubblewrap where it can run,
    else no sandbox with the reason in `unconfined`; `required` is bubblewrap or nothing."""
    if name in ("bwrap", "required"):
        return Bubblewrap()
    if name == "auto":
        problem = bwrap_problem()
        return Unconfined(problem) if problem else Bubblewrap()
    if name == "docker":
        return Docker(image)
    if name == "none":
        return Sandbox()
    raise SandboxUnavailable(f"unknown sandbox {name!r} (known: {', '.join(KINDS)})")
