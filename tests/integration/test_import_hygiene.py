"""Dependencies point inward, and the core never drags the UI or the drivers in."""

import subprocess
import sys
from pathlib import Path

import pytest

from tests.support import CHECKOUT

ROOT = CHECKOUT


DRIVERS_AND_UI = ("textual", "asyncpg", "fastapi", "uvicorn")


@pytest.mark.parametrize(
    ("module", "forbidden"),
    [
        *(
            (m, DRIVERS_AND_UI)
            for m in (
                "core.control.service",
                "core.config.schema",
                "core.control.audit",
                "core.worker.pool",
                "store",
                "store.sqlite",
                "adapters",
                "t25_tui.cli.main",
                "t25_tui.runtime",
            )
        ),
        ("t25_tui.api.server", ("textual", "asyncpg")),  # serve never runs the cockpit
    ],
)
def test_importing_leaves_the_ui_and_the_drivers_out(module, forbidden):
    code = (
        f"import sys, {module}; "
        f"bad = [m for m in {forbidden!r} if m in sys.modules]; "
        "print(','.join(bad))"
    )
    out = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, cwd=ROOT, check=True
    )
    assert out.stdout.strip() == ""


def test_core_imports_no_outer_layer():
    out = subprocess.run(
        [
            sys.executable,
            "-c",
            (
                "import sys, pkgutil, importlib, core\n"
                "for m in pkgutil.walk_packages(core.__path__, 'core.'):\n"
                "    importlib.import_module(m.name)\n"
                "bad = sorted(m for m in sys.modules if m.split('.')[0] in "
                "('store', 'adapters', 't25_tui', 'textual', 'aiosqlite', 'asyncpg', 'httpx'))\n"
                "print(','.join(bad))"
            ),
        ],
        capture_output=True,
        text=True,
        cwd=ROOT,
        check=True,
    )
    assert out.stdout.strip() == ""


def test_import_linter_contracts_hold():
    lint = Path(sys.executable).with_name("lint-imports")
    done = subprocess.run([str(lint)], capture_output=True, text=True, cwd=ROOT)
    assert done.returncode == 0, done.stdout + done.stderr
