"""The real `t25 tui` in a pseudo-terminal, the way a person over SSH runs it.

`Terminal` forks the binary onto a pty (it becomes the session's controlling terminal),
reads what it draws, types keys, and can hang up the line as a dropped SSH session does.
"""

from __future__ import annotations

import fcntl
import os
import pty
import re
import select
import signal
import struct
import subprocess
import sys
import termios
import time
from pathlib import Path

from t25_tui.tui.sample_data import make_sample_repo

ANSI = re.compile(
    rb"\x1b\[[0-9;?<>=]*[ -/]*[@-~]|\x1b[()][0-9A-Za-z]|\x1b[=>78NOPc\\]|\x1b\][^\x07\x1b]*(\x07|\x1b\\)"
)
T25 = Path(sys.executable).with_name("t25")


class Terminal:
    def __init__(
        self, cwd: Path, *args: str, size: tuple[int, int] = (100, 30), command: str = "tui"
    ) -> None:
        self.raw = b""
        pid, fd = pty.fork()
        if pid == 0:  # the child: becomes `t25 tui` on the pty
            os.chdir(cwd)
            env = {k: v for k, v in os.environ.items() if k not in ("NO_COLOR", "TEXTUAL")}
            env.update(TERM="xterm-256color", COLUMNS=str(size[0]), LINES=str(size[1]))
            os.execve(str(T25), [str(T25), "--actor", "ssh-operator", command, *args], env)
        self.pid, self.fd = pid, fd
        fcntl.ioctl(fd, termios.TIOCSWINSZ, struct.pack("HHHH", size[1], size[0], 0, 0))
        os.kill(pid, signal.SIGWINCH)

    def read(self, timeout: float = 0.2) -> None:
        if self.fd < 0:
            # not a wait: a closed terminal gives nothing to read for `timeout`
            time.sleep(timeout)
            return
        end = time.monotonic() + timeout
        while (left := end - time.monotonic()) > 0:
            ready, _, _ = select.select([self.fd], [], [], left)
            if not ready:
                return
            try:
                chunk = os.read(self.fd, 65536)
            except OSError:
                return
            if not chunk:
                return
            self.raw += chunk
            timeout = 0.005  # got something: drain what follows at once, then return
            end = time.monotonic() + timeout

    def text(self) -> str:
        return ANSI.sub(b"", self.raw).decode(errors="replace")

    def wait_for(self, needle: str, timeout: float = 60.0) -> None:
        end = time.monotonic() + timeout
        while needle not in self.text():
            if time.monotonic() > end:
                raise AssertionError(
                    f"{needle!r} never appeared; screen tail:\n{self.text()[-2000:]}"
                )
            self.read()

    def type(self, keys: str | bytes) -> None:
        self.raw = b""  # what is drawn from now on answers these keys
        os.write(self.fd, keys.encode() if isinstance(keys, str) else keys)
        self.read(0.3)

    def wait_exit(self, timeout: float = 30.0) -> int | None:
        end = time.monotonic() + timeout
        while time.monotonic() < end:
            self.read(0.1)
            done, status = os.waitpid(self.pid, os.WNOHANG)
            if done:
                return os.waitstatus_to_exitcode(status)
        return None

    def hang_up(self) -> None:
        """Drop the line: close our end of the pty, as sshd does when the session dies."""
        os.close(self.fd)
        self.fd = -1

    def kill(self) -> None:
        try:
            os.kill(self.pid, signal.SIGKILL)
            os.waitpid(self.pid, 0)
        except (ProcessLookupError, ChildProcessError):
            pass


def make_sample_checkout(path: Path, config: str) -> Path:
    path.mkdir(parents=True)
    make_sample_repo(path)
    (path / ".git" / "info" / "exclude").write_text("/.factory/\n/t25.yaml\n")
    (path / "t25.yaml").write_text(config.replace("PYTHON", sys.executable))
    return path


def t25_as_operator(repo: Path, *args: str) -> str:
    return subprocess.run(
        [str(T25), "--actor", "ssh-operator", *args],
        cwd=repo,
        check=True,
        capture_output=True,
        text=True,
        stdin=subprocess.DEVNULL,
    ).stdout
