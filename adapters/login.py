"""Whether an agent CLI has a login, checked cheaply and offline (`t25 doctor`).

A CLI that offers a status command declares it as a `LoginProbe` on its spec, with the
function that reads what it says, in its own `adapters/<cli>.py`; T25 runs it bounded by a
timeout, with the environment a run would get, and reads only whether it says yes or no:
what it printed is never shown, so no part of a credential can be. A key in one of the
CLI's login variables, or its credentials file in HOME, counts as a login too. A CLI with
neither a probe nor one of those is "not checked", never "logged in".
"""

from __future__ import annotations

import asyncio
import os
import re
import tempfile
from collections.abc import Callable
from dataclasses import dataclass
from enum import StrEnum
from pathlib import Path
from typing import Protocol

from adapters.process import minimal_env, passthrough_env, run_process

PROBE_TIMEOUT_S = 30.0  # opencode alone takes 3 s of CPU to say; 13 s on two busy cores
_ANSI = re.compile(r"\x1b\[[0-9;]*[A-Za-z]")


@dataclass(frozen=True)
class LoginProbe:
    """A status command a CLI offers: `argv` after the binary, `read`, which turns its exit
    status, stdout and stderr into logged in (True), not (False), or cannot tell (None), and the
    command a person logs in with."""

    argv: tuple[str, ...]
    read: Callable[[int, str, str], bool | None]
    log_in: str

    def command(self, binary: str) -> str:
        return " ".join((binary, *self.argv))


class LoginSpec(Protocol):
    """What a CLI's adapter says of its login (adapters.base.CliAdapterSpec)."""

    @property
    def binary(self) -> str: ...
    @property
    def login_env(self) -> tuple[str, ...]: ...
    @property
    def login_files(self) -> tuple[str, ...]: ...
    @property
    def login_probe(self) -> LoginProbe | None: ...
    @property
    def needs_login(self) -> bool: ...


class LoginState(StrEnum):
    YES = "yes"
    NO = "no"
    UNKNOWN = "unknown"  # the probe ran but gave no answer T25 could read
    NOT_CHECKED = "not checked"  # no probe, no key, no credentials file
    NOT_NEEDED = "not needed"  # T25's own scripted agent


@dataclass(frozen=True)
class Login:
    """What `t25 doctor` learned about one CLI's login, and how (`by`, never a secret)."""

    state: LoginState
    by: str

    def text(self) -> str:
        return f"{self.state} ({self.by})" if self.by else str(self.state)


def key_variables(spec: LoginSpec) -> list[str]:
    """The CLI's login variables that hold a key or token: set, they are a login."""
    return [name for name in spec.login_env if "KEY" in name or "TOKEN" in name]


async def check_login(spec: LoginSpec, binary: str | None) -> Login:
    """The login of the CLI at `binary` (None: not installed, nothing is run)."""
    if not spec.needs_login:
        return Login(LoginState.NOT_NEEDED, "")
    said: bool | None = None
    probe = spec.login_probe
    if probe is not None and binary is not None:
        said = await _ask(probe, binary, spec)
        if said:
            return Login(LoginState.YES, f"`{probe.command(spec.binary)}`")
    if key := next((v for v in key_variables(spec) if os.environ.get(v)), None):
        return Login(LoginState.YES, f"{key} is set")
    home = Path.home()
    found = next((f for f in spec.login_files if (home / f).is_file()), None)
    if found and (probe is None or said is None):  # the probe's "no" outweighs a stale file
        return Login(LoginState.YES, f"~/{found} exists")
    if probe is None:
        return Login(LoginState.NOT_CHECKED, "no probe")
    if binary is None:
        return Login(LoginState.NOT_CHECKED, "not installed")
    command = f"`{probe.command(spec.binary)}`"
    if said is None:
        return Login(LoginState.UNKNOWN, f"{command} gave no answer")
    return Login(LoginState.NO, command)


async def _ask(probe: LoginProbe, binary: str, spec: LoginSpec) -> bool | None:
    """The probe's answer; None when it did not run, timed out or said nothing readable."""
    done = await run_process(
        [binary, *probe.argv],
        cwd=Path(tempfile.gettempdir()),
        env=minimal_env(passthrough_env(spec.login_env)),
        timeout_s=PROBE_TIMEOUT_S,
        abort=asyncio.Event(),
        grace_s=0.5,
        log_limit=65536,
    )
    if done.exit_code is None:
        return None
    out, err = (
        _ANSI.sub("", text.decode("utf-8", "replace")) for text in (done.stdout, done.stderr)
    )
    return probe.read(done.exit_code, out, err)
