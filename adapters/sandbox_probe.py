"""What bubblewrap gives a run on this machine, seen from inside, once per process.

A bubblewrap that starts is not yet a wall. Started by root without `--cap-drop ALL`, the
sandboxed process keeps CAP_SYS_ADMIN: it can bind-mount `/` elsewhere, remount it
read-write and write the host through it. So the probe starts a sandbox with the flags every
run gets and looks from inside: the effective and permitted capability sets must be empty
and a bind mount must be refused. It also tells whether a network namespace of the run's own
can be had (`network: allowlist` and `none` need one).

    probe()          -> SandboxProbe, tried once per process
    bwrap_problem()  -> why bubblewrap cannot confine a run here, or None
"""

from __future__ import annotations

import functools
import json
import os
import shutil
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

PROBE_TIMEOUT_S = 10.0

# Run inside with the interpreter T25 runs on, isolated and without site: the standard
# library only. A bind mount of / is the first step of the remount attack.
_LOOK = """
import ctypes, json, os
caps = {}
for line in open("/proc/self/status"):
    key, _, value = line.partition(":")
    if key in ("CapEff", "CapPrm", "CapAmb"):
        caps[key] = value.strip()
libc = ctypes.CDLL(None, use_errno=True)
os.makedirs("/tmp/t25-probe", exist_ok=True)
mounted = libc.mount(b"/", b"/tmp/t25-probe", None, 4096 | 16384, None) == 0
print(json.dumps({"caps": caps, "mounted": mounted, "errno": ctypes.get_errno()}))
"""


@dataclass(frozen=True)
class SandboxProbe:
    """What a sandboxed process could do here, as seen from inside one."""

    problem: str | None = None  # why bubblewrap cannot confine a run, or None
    capabilities: str = ""  # the effective set inside, as /proc shows it
    mount_refused: bool = False
    own_network: bool = False  # a network namespace of its own (--unshare-net) can be had

    def summary(self) -> str:
        """One line for `t25 doctor`."""
        if self.problem and not self.capabilities:
            return f"not usable: {self.problem}"
        caps = "none" if _empty(self.capabilities) else f"CapEff {self.capabilities}"
        mount = "refused" if self.mount_refused else "ALLOWED"
        network = "its own" if self.own_network else "cannot be had (no network namespace)"
        return f"capabilities inside: {caps}; a mount: {mount}; network namespace: {network}"


def _empty(mask: str) -> bool:
    return bool(mask) and int(mask, 16) == 0


def _look(
    path: str, isolation: tuple[str, ...], unshare_net: bool
) -> tuple[dict[str, object] | None, str]:
    """Start the probe sandbox, isolated as every run is (`isolation`: adapters.sandbox's
    flags); (what it saw, or None, and why not)."""

    interpreter = Path(os.path.realpath(sys.executable))  # a virtualenv's python is a link
    argv = [
        path,
        "--die-with-parent",
        *isolation,
        *(["--unshare-net"] if unshare_net else []),
        *("--ro-bind", "/", "/", "--dev", "/dev", "--proc", "/proc", "--tmpfs", "/tmp"),
        *_given_back(interpreter),
        "--",
        str(interpreter),
        "-I",
        "-S",
        "-c",
        _LOOK,
    ]
    try:
        done = subprocess.run(
            argv, capture_output=True, text=True, timeout=PROBE_TIMEOUT_S, check=False
        )
    except (OSError, subprocess.TimeoutExpired) as exc:
        return None, f"bwrap did not run: {exc}"
    try:
        seen = json.loads(done.stdout.strip().splitlines()[-1])
    except (IndexError, ValueError):
        last = done.stderr.strip().splitlines()[-1:] or [f"exit {done.returncode}"]
        return None, last[0]
    return (seen if isinstance(seen, dict) else None), ""


def _given_back(interpreter: Path) -> list[str]:
    """The interpreter's top-level /tmp directory, bound over the probe's fresh /tmp when it
    lives there (a checkout and its virtualenv cloned under /tmp)."""
    tmp = Path("/tmp")
    if not interpreter.is_relative_to(tmp) or len(interpreter.parts) < 3:
        return []
    top = str(tmp / interpreter.parts[2])
    return ["--ro-bind", top, top]


@functools.cache
def _probe(path: str, isolation: tuple[str, ...]) -> SandboxProbe:
    seen, why = _look(path, isolation, unshare_net=True)
    own_network = seen is not None
    if seen is None:
        seen, why = _look(path, isolation, unshare_net=False)
    if seen is None:
        return SandboxProbe(
            problem=f"bwrap cannot create its namespaces here: {why} "
            "(are unprivileged user namespaces disabled?)"
        )
    caps = seen.get("caps")
    effective = str(caps.get("CapEff", "")) if isinstance(caps, dict) else ""
    permitted = str(caps.get("CapPrm", "")) if isinstance(caps, dict) else ""
    refused = seen.get("mounted") is False
    problem = None
    if not (_empty(effective) and _empty(permitted)):
        problem = (
            f"bubblewrap leaves capabilities inside the sandbox (CapEff {effective or '?'}): "
            "an agent could remount the host read-write"
        )
    elif not refused:
        problem = "a mount inside the sandbox was allowed: an agent could remount the host"
    return SandboxProbe(
        problem=problem, capabilities=effective, mount_refused=refused, own_network=own_network
    )


def probe(isolation: tuple[str, ...]) -> SandboxProbe:
    """What bubblewrap started with `isolation` gives a run here, tried once per binary,
    flags and process: a probe costs a few tens of milliseconds, and the answer does not
    change while T25 runs (adapters.sandbox.probe asks it with the runs' own flags)."""
    path = shutil.which("bwrap")
    if path is None:
        return SandboxProbe(
            problem="bubblewrap is not installed (Debian: apt-get install bubblewrap)"
        )
    return _probe(path, isolation)
