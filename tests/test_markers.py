"""`pytest -m "not slow"`: the unit tests and the store contract suite on both backends,
without the tests that start whole programs or work real repositories with many git
processes (marked in tests/conftest.py)."""

from __future__ import annotations

import subprocess
import sys

from tests.support import CHECKOUT

ROOT = CHECKOUT
PYTEST = [sys.executable, "-m", "pytest", "-p", "no:cacheprovider", "--collect-only", "-q"]
SAMPLE = [
    "tests/test_policies.py",  # unit
    "tests/store/test_contract.py",  # the contract suite
    "tests/test_audit.py",  # unit, but for two tests through the binary
    "tests/test_cli.py",  # the binary
    "tests/test_pipeline.py",  # the scripted agent through the pipeline
    "tests/test_worktrees.py",  # T25's git on real repositories
]


def collected(marks: str) -> list[str]:
    done = subprocess.run(
        [*PYTEST, "-m", marks, *SAMPLE],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == 0, done.stdout + done.stderr
    return [line for line in done.stdout.splitlines() if "::" in line]


def test_not_slow_is_the_unit_tests_and_the_contract_suite_on_both_backends():
    fast = collected("not slow")
    files = {node.split("::")[0] for node in fast}
    assert files == {
        "tests/test_policies.py",
        "tests/store/test_contract.py",
        "tests/test_audit.py",
    }
    contract = [n for n in fast if n.startswith("tests/store/test_contract.py")]
    assert any(n.endswith("[postgres]") for n in contract)
    assert any(n.endswith("[sqlite]") for n in contract)


def test_slow_is_what_starts_programs_down_to_a_single_test_through_the_binary():
    slow = collected("slow")
    files = {node.split("::")[0] for node in slow}
    assert files == {
        "tests/test_cli.py",
        "tests/test_pipeline.py",
        "tests/test_audit.py",
        "tests/test_worktrees.py",
    }
    separators = "test_a_log_written_with_raw_separators_verifies_shows_them_and_catches"
    against_the_store = "test_verify_reports_a_decision_in_the_store_with_no_line_and_a_line"
    assert [n for n in slow if n.startswith("tests/test_audit.py")] == [
        f"tests/test_audit.py::{separators}_later_tampering",
        f"tests/test_audit.py::{against_the_store}_with_no_effect",
    ]


def test_a_test_that_hangs_is_stopped_and_named_and_the_run_goes_on(tmp_path):
    """The per-test timeout (pyproject.toml): a hanging test's process is ended, the test
    reported by name, and the test after it still runs."""
    (tmp_path / "test_hangs.py").write_text(
        "import time\n\n\ndef test_hangs():\n    time.sleep(120)\n\n\n"
        "def test_after_it():\n    assert True\n"
    )
    done = subprocess.run(
        [sys.executable, "-m", "pytest", "-p", "no:cacheprovider", "-n", "1", "--timeout", "3",
         "-c", str(ROOT / "pyproject.toml"), "--rootdir", str(tmp_path), str(tmp_path)],
        cwd=tmp_path, capture_output=True, text=True, timeout=90,
    )  # fmt: skip
    assert done.returncode == 1, done.stdout + done.stderr
    out = done.stdout
    assert "crashed while running 'test_hangs.py::test_hangs'" in out, out
    assert "1 failed, 1 passed" in out, out
