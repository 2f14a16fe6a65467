"""Caps on one run's resources: its memory, its processes, its CPU time.

A runaway agent (or a test suite it wrote) must not take the machine that T25 and every other
run live on. Each run - an agent or a QA check - is started by a small launcher
(`adapters/capped.py`) that puts it under its caps before it execs the run's command (the
sandbox, and all it starts, inherit them):

- **cgroup v2**, where T25 can get a delegated subtree (root, or a subtree systemd delegated
  to the user): the run gets a cgroup of its own with `memory.max`, `memory.swap.max` and
  `pids.max` - the whole run's memory and process count, however many processes it forks.
- **cgroup v1** (a hybrid hierarchy, as root): the same with the `memory` and `pids`
  controllers' own files.
- **per process** where neither can be had: `RLIMIT_DATA` (a process's private writable
  memory; `RLIMIT_AS` would refuse the large reservations Node's WebAssembly makes) and
  `RLIMIT_NPROC` (this user's process count, the run's share added; the kernel does not
  apply it to root).

The CPU time is `RLIMIT_CPU`, for each process of the run, everywhere. After the run, a cap it
ran into is read back (the cgroup's events; a process killed by SIGXCPU) and the run fails
saying which cap and its value.

    backend()                 -> the Backend in force here, tried once per process
    async with capped(argv, caps, name) as run:  run.argv; run.hit() after the run
"""

from __future__ import annotations

import asyncio
import contextlib
import functools
import logging
import os
import re
import signal
import sys
import time
import uuid
from collections.abc import AsyncIterator
from dataclasses import dataclass, field
from pathlib import Path

from core.domain.agent import RunCaps

log = logging.getLogger("t25.adapters")

LAUNCHER = Path(__file__).with_name("capped.py")
CGROUP_ROOT = Path("/sys/fs/cgroup")
MIB = 2**20
EMPTYING_S = 5.0  # how long a run cgroup's killed processes get to be gone
CPU_GRACE_S = 2  # past the CPU cap, SIGXCPU; this much later, SIGKILL


@dataclass(frozen=True)
class Backend:
    """How caps are put on a run here: `cgroup2`, `cgroup1` or `rlimit`, and where."""

    kind: str
    parent: Path | None = None  # cgroup2: the directory runs' cgroups are made in
    parents: dict[str, Path] = field(default_factory=dict)  # cgroup1: per controller
    why: str = ""  # why no cgroup could be had (rlimit)

    def describe(self) -> str:
        """One line for `t25 doctor`."""
        if self.kind == "cgroup2":
            return f"cgroup v2 under {self.parent}: memory and processes per run, CPU per process"
        if self.kind == "cgroup1":
            where = ", ".join(f"{k} {v}" for k, v in sorted(self.parents.items()))
            return f"cgroup v1 ({where}): memory and processes per run, CPU per process"
        return f"per process (no cgroup: {self.why}): memory, CPU time" + (
            " and this user's process count" if os.geteuid() != 0 else "; no process cap for root"
        )


def _own_cgroups() -> dict[str, str]:
    """This process's cgroup per hierarchy: {"": v2 path, "memory": v1 path, ...}."""
    out: dict[str, str] = {}
    with contextlib.suppress(OSError):
        for line in Path("/proc/self/cgroup").read_text().splitlines():
            _, controllers, path = line.split(":", 2)
            for name in controllers.split(",") if controllers else [""]:
                out[name] = path
    return out


def _mounts() -> dict[str, Path]:
    """Where each cgroup hierarchy is mounted: {"": v2, "memory": v1 memory, ...}."""
    out: dict[str, Path] = {}
    with contextlib.suppress(OSError):
        for line in Path("/proc/self/mountinfo").read_text().splitlines():
            before, _, after = line.partition(" - ")
            kind, _, options = after.split(" ", 2) if after.count(" ") >= 2 else ("", "", "")
            where = Path(before.split(" ")[4])
            if kind == "cgroup2":
                out.setdefault("", where)
            elif kind == "cgroup":
                for name in options.split(","):
                    if name in ("memory", "pids"):
                        out.setdefault(name, where)
    return out


def _writable(path: Path) -> bool:
    return path.is_dir() and os.access(path, os.W_OK)


def _cgroup2(mount: Path, own: str) -> Backend | str:
    """A subtree of the unified hierarchy to make runs' cgroups in, or why there is none."""
    here = mount / own.lstrip("/")
    try:
        controllers = set((here / "cgroup.controllers").read_text().split())
    except OSError as exc:
        return f"cgroup v2 cannot be read ({exc.strerror})"
    if not {"memory", "pids"} <= controllers:
        return "cgroup v2 holds no memory and pids controllers here"
    if not _writable(here):
        return f"{here} is not T25's to write (no delegated subtree)"
    parent = here / f"t25-{os.getpid()}"
    try:
        parent.mkdir(exist_ok=True)
        # A cgroup with processes of its own may not hand controllers down (the "no internal
        # processes" rule), except the root: T25's own process moves into a leaf first.
        if own not in ("", "/"):
            leaf = here / f"t25-{os.getpid()}-self"
            leaf.mkdir(exist_ok=True)
            (leaf / "cgroup.procs").write_text(str(os.getpid()))
            (here / "cgroup.subtree_control").write_text("+memory +pids")
        (parent / "cgroup.subtree_control").write_text("+memory +pids")
    except OSError as exc:
        return f"cgroup v2 at {here} cannot be delegated to runs ({exc.strerror})"
    return Backend("cgroup2", parent=parent)


def _cgroup1(mounts: dict[str, Path], own: dict[str, str]) -> Backend | str:
    parents: dict[str, Path] = {}
    for name in ("memory", "pids"):
        if name not in mounts:
            return f"no cgroup v1 {name} controller is mounted"
        here = mounts[name] / own.get(name, "/").lstrip("/")
        if not _writable(here):
            return f"{here} is not T25's to write"
        parents[name] = here
    return Backend("cgroup1", parents=parents)


@functools.cache
def backend() -> Backend:
    """The way caps are put on runs here, decided once per process."""
    if not sys.platform.startswith("linux"):
        return Backend("rlimit", why="not Linux")
    mounts, own = _mounts(), _own_cgroups()
    reasons = []
    if "" in mounts and "" in own:
        found = _cgroup2(mounts[""], own[""])
        if isinstance(found, Backend):
            return found
        reasons.append(found)
    if "memory" in mounts:
        found = _cgroup1(mounts, own)
        if isinstance(found, Backend):
            return found
        reasons.append(found)
    return Backend("rlimit", why="; ".join(reasons) or "no cgroup hierarchy is mounted")


def _own_processes() -> int:
    """How many processes this user has now (RLIMIT_NPROC counts them all)."""
    uid, count = os.getuid(), 0
    with contextlib.suppress(OSError):
        for entry in os.scandir("/proc"):
            if entry.name.isdigit():
                with contextlib.suppress(OSError):
                    count += entry.stat().st_uid == uid
    return count


@dataclass
class CappedRun:
    """One run under its caps: the argv that starts it so, and what it ran into."""

    argv: list[str]
    caps: RunCaps | None
    cgroups: list[Path] = field(default_factory=list)
    kind: str = "rlimit"

    def hit(self, exit_code: int | None = None, killed_by: int | None = None) -> str | None:
        """The cap the run ran into, with its value and where to raise it; None if none."""
        caps = self.caps
        if caps is None:
            return None
        if self._memory_hit():
            return f"memory cap reached: {caps.memory_mib:,} MiB (limits.run_memory_mib)"
        if self._processes_hit():
            return f"process cap reached: {caps.processes:,} (limits.run_processes)"
        if killed_by == signal.SIGXCPU or exit_code == 128 + signal.SIGXCPU:
            return f"CPU time cap reached: {caps.cpu_s:,} s per process (limits.run_cpu_s)"
        return None

    def _memory_hit(self) -> bool:
        for where in self.cgroups:
            for name in ("memory.events", "memory.oom_control"):
                with contextlib.suppress(OSError, ValueError):
                    text = (where / name).read_text()
                    if found := re.search(r"^oom_kill (\d+)", text, re.MULTILINE):
                        return int(found[1]) > 0
        return False

    def _processes_hit(self) -> bool:
        for where in self.cgroups:
            with contextlib.suppress(OSError, ValueError):
                text = (where / "pids.events").read_text()
                if found := re.search(r"^max (\d+)", text, re.MULTILINE):
                    return int(found[1]) > 0
        return False


def _limits(caps: RunCaps, kind: str) -> list[str]:
    """The rlimits the launcher sets: CPU always; memory and processes without a cgroup."""
    out = [f"CPU={caps.cpu_s}:{caps.cpu_s + CPU_GRACE_S}"]
    if kind == "rlimit":
        out.append(f"DATA={caps.memory_mib * MIB}")
        if os.geteuid() != 0:  # root is exempt from RLIMIT_NPROC: no point setting it
            out.append(f"NPROC={_own_processes() + caps.processes}")
    return out


def _make(where: Path, files: dict[str, str]) -> Path:
    where.mkdir()
    for name, value in files.items():
        path = where / name
        if path.exists():
            path.write_text(value)
    return where


def _cgroups_for(found: Backend, caps: RunCaps, name: str) -> list[Path]:
    memory = str(caps.memory_mib * MIB)
    leaf = f"run-{name}-{uuid.uuid4().hex[:8]}"
    if found.kind == "cgroup2" and found.parent is not None:
        files = {"memory.max": memory, "memory.swap.max": "0", "pids.max": str(caps.processes)}
        return [_make(found.parent / leaf, files)]
    made = []
    try:
        memory_files = {"memory.limit_in_bytes": memory, "memory.memsw.limit_in_bytes": memory}
        made.append(_make(found.parents["memory"] / leaf, memory_files))
        made.append(_make(found.parents["pids"] / leaf, {"pids.max": str(caps.processes)}))
    except OSError:
        _remove(made)
        raise
    return made


def _remove(cgroups: list[Path]) -> None:
    """Kill what is left in each run cgroup (a run's processes die with it), wait for them
    to be gone (bounded), then remove it. Blocking: run it in a thread."""
    for where in cgroups:
        with contextlib.suppress(OSError):
            (where / "cgroup.kill").write_text("1")
        deadline = time.monotonic() + EMPTYING_S
        while time.monotonic() < deadline:
            try:
                pids = [int(p) for p in (where / "cgroup.procs").read_text().split()]
            except OSError:
                break
            if not pids:
                break
            for pid in pids:
                with contextlib.suppress(OSError):
                    os.kill(pid, signal.SIGKILL)
            time.sleep(0.02)
        try:
            where.rmdir()
        except OSError as exc:
            log.warning("the run cgroup %s could not be removed: %s", where, exc.strerror)


@contextlib.asynccontextmanager
async def capped(argv: list[str], caps: RunCaps | None, name: str) -> AsyncIterator[CappedRun]:
    """`argv` started under `caps` (as it is when there are none); the run's cgroups, if
    any, removed afterwards with whatever is left in them."""
    if caps is None:
        yield CappedRun(argv, None)
        return
    found = backend()
    cgroups: list[Path] = []
    kind = found.kind
    if kind != "rlimit":
        try:
            cgroups = _cgroups_for(found, caps, re.sub(r"[^\w.-]", "_", name)[:40])
        except OSError as exc:  # the subtree went away, or is full: caps per process instead
            log.warning("no cgroup for run %s (%s): its caps are per process", name, exc.strerror)
            kind = "rlimit"
    launcher = [sys.executable, "-I", "-S", str(LAUNCHER)]
    for where in cgroups:
        launcher += ["--join", str(where / "cgroup.procs")]
    for limit in _limits(caps, kind):
        launcher += ["--limit", limit]
    try:
        yield CappedRun([*launcher, "--", *argv], caps, cgroups, kind)
    finally:
        if cgroups:
            await asyncio.to_thread(_remove, cgroups)
