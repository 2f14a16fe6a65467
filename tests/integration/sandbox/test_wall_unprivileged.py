"""The hostile cases of the wall, as an unprivileged user: the suite runs as root in CI, so this
test runs tests/integration/sandbox/test_network_wall.py, tests/integration/sandbox/test_sandbox_wall.py and tests/integration/sandbox/test_sandbox.py
again under `setpriv` as the user `nobody`, each case as it is (the same attacks; the caps per
process where that user has no cgroup). Root and a user without privileges differ in what bubblewrap does (a user
namespace or none) and in what the kernel lets a process keep, so both are tried.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import sysconfig
import tempfile
from pathlib import Path

import pytest

from tests.support import CHECKOUT

ROOT = CHECKOUT
NOBODY = 65534
MODULES = (
    "tests/integration/sandbox/test_network_wall.py",
    "tests/integration/sandbox/test_sandbox_wall.py",
    "tests/integration/sandbox/test_sandbox.py",
)
REQUIRED = os.environ.get("T25_REQUIRE_PG") == "1"  # CI: a skip here would hide the cases


def _interpreter() -> str | None:
    """An interpreter `nobody` may run, of this one's version (the virtualenv's packages,
    compiled for it, are imported from their directory)."""
    want = f"python{sys.version_info.major}.{sys.version_info.minor}"
    for path in (shutil.which(want, path="/usr/local/bin:/usr/bin:/bin"), sys.executable):
        if path and _as_nobody([path, "-c", ""], {}).returncode == 0:
            return path
    return None


def _as_nobody(
    argv: list[str], env: dict[str, str], view: Path | None = None, **kw
) -> subprocess.CompletedProcess[str]:
    """`argv` run as `nobody`; with `view`, in a mount namespace where the checkout is also
    seen at `view` (its own folders may lie under a home nobody can enter, /root's)."""
    setpriv = ["setpriv", f"--reuid={NOBODY}", f"--regid={NOBODY}", "--clear-groups"]
    prefix: list[str] = []
    if view is not None:
        bind = 'mount --bind "$1" "$2" && cd "$2" && shift 2 && exec "$@"'
        prefix = ["unshare", "--mount", "--propagation", "private", "sh", "-c", bind, "sh"]
        prefix += [str(ROOT), str(view)]
    return subprocess.run(
        [*prefix, *setpriv, *argv], env=env, capture_output=True, text=True, check=False, **kw
    )


def _seen_at(path: str, view: Path) -> str:
    """Where `path` is seen at `view`, the checkout's place for `nobody`."""
    inside = Path(path)
    return str(view / inside.relative_to(ROOT)) if inside.is_relative_to(ROOT) else path


def _owned_dir(name: str) -> Path:
    path = Path(tempfile.mkdtemp(prefix=f"t25-{name}-"))
    os.chown(path, NOBODY, NOBODY)
    return path


@pytest.mark.skipif(os.geteuid() != 0, reason="already unprivileged: the modules run as you")
def test_the_wall_holds_for_an_unprivileged_user():
    python = _interpreter()
    if python is None or not shutil.which("setpriv"):
        message = "no interpreter the user nobody may run, or no setpriv"
        if REQUIRED:
            pytest.fail(message)
        pytest.skip(message)
    home, base, bin_dir = _owned_dir("home"), _owned_dir("base"), _owned_dir("bin")
    # Not under /tmp: inside a sandbox /tmp is a fresh one, and the checkout is read there.
    view = Path(tempfile.mkdtemp(prefix="t25-checkout-", dir="/var/tmp"))
    view.chmod(0o755)
    try:
        # The scripted agent as `nobody` can start it: the checkout's script, on that user's
        # interpreter (the virtualenv's entry point names one it may not run).
        agent = bin_dir / "t25-scripted-agent"
        agent.write_text(
            f'#!/bin/sh\nexec {python} -I {view / "adapters" / "scripted_agent.py"} "$@"\n'
        )
        agent.chmod(0o755)
        paths = sysconfig.get_paths()
        env = {
            "PATH": f"{bin_dir}:/usr/local/bin:/usr/bin:/bin",
            "HOME": str(home),
            "LANG": "C.UTF-8",
            "PYTHONPATH": os.pathsep.join(
                dict.fromkeys(
                    [str(view), _seen_at(paths["purelib"], view), _seen_at(paths["platlib"], view)]
                )
            ),
            "T25_TEST_PG_DSN": os.environ.get("T25_TEST_PG_DSN", ""),
        }
        probe = _as_nobody(
            [python, "-c", "import core, adapters, pytest, pydantic"], env, view, cwd="/"
        )
        assert probe.returncode == 0, (
            "the user nobody cannot read the checkout or its virtualenv: " + probe.stderr[-500:]
        )
        done = _as_nobody(
            [
                python,
                "-m",
                "pytest",
                "-q",
                "-p",
                "no:cacheprovider",
                f"--basetemp={base}",
                *MODULES,
            ],
            env,
            view,
            cwd="/",
            timeout=900,
        )
    finally:
        for path in (home, base, bin_dir, view):
            shutil.rmtree(path, ignore_errors=True)
    summary = done.stdout.strip().splitlines()[-1] if done.stdout.strip() else ""
    assert done.returncode == 0, done.stdout[-6000:] + done.stderr[-2000:]
    assert " passed" in summary and "skipped" not in summary and "failed" not in summary, summary
