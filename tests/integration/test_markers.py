"""The marks a test gets from its folder (tests/conftest.py): its kind, and `slow` for
integration and e2e; `pytest -m "not slow"` is then the unit and contract tests."""

from __future__ import annotations

import os
import subprocess
import sys

from tests.support import CHECKOUT

ROOT = CHECKOUT
PYTEST = [sys.executable, "-m", "pytest", "-p", "no:cacheprovider", "--collect-only", "-q"]
# The pytest these tests start reads only its arguments: a `-v` or `-n` the person running the
# suite put in PYTEST_ADDOPTS would change what it prints.
ENV = {k: v for k, v in os.environ.items() if k != "PYTEST_ADDOPTS"}
SAMPLE = {
    "tests/unit/test_policies.py": "unit",
    "tests/contract/store/test_contract.py": "contract",  # on both backends
    "tests/integration/test_pipeline.py": "integration",  # the scripted agent through it
    "tests/integration/git/test_worktrees.py": "integration",  # T25's git on real repositories
    "tests/e2e/cli/test_audit_verify.py": "e2e",  # the binary
}


def collected(marks: str) -> list[str]:
    done = subprocess.run(
        [*PYTEST, "-m", marks, *SAMPLE],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=120,
        env=ENV,
    )
    assert done.returncode == 0, done.stdout + done.stderr
    return [line for line in done.stdout.splitlines() if "::" in line]


def files(nodes: list[str]) -> set[str]:
    return {node.split("::")[0] for node in nodes}


def test_each_kind_is_its_folder():
    for kind in ("unit", "contract", "integration", "e2e"):
        assert files(collected(kind)) == {f for f, k in SAMPLE.items() if k == kind}, kind


def test_not_slow_is_the_unit_and_contract_tests_on_both_backends():
    fast = collected("not slow")
    assert fast == collected("unit or contract")
    assert files(fast) == {"tests/unit/test_policies.py", "tests/contract/store/test_contract.py"}
    assert any(n.endswith("[postgres]") for n in fast)
    assert any(n.endswith("[sqlite]") for n in fast)


def test_slow_is_integration_and_e2e():
    assert collected("slow") == collected("integration or e2e")


# Two pytest workers start (the second replaces the one the timeout ended): over 90 s on a
# loaded machine. Under the per-test limit, so a hang is still named with its command.
TWO_WORKER_STARTS_S = 400


def test_a_test_that_hangs_is_stopped_and_named_and_the_run_goes_on(tmp_path):
    """The per-test timeout (pyproject.toml): a hanging test's process is ended, the test
    reported by name, and the test after it still runs."""
    (tmp_path / "test_hangs.py").write_text(
        "import time\n\n\ndef test_hangs():\n    time.sleep(900)\n\n\n"
        "def test_after_it():\n    assert True\n"
    )
    done = subprocess.run(
        [sys.executable, "-m", "pytest", "-p", "no:cacheprovider", "-n", "1", "--timeout", "3",
         "-c", str(ROOT / "pyproject.toml"), "--rootdir", str(tmp_path), str(tmp_path)],
        cwd=tmp_path, capture_output=True, text=True, timeout=TWO_WORKER_STARTS_S, env=ENV,
    )  # fmt: skip
    assert done.returncode == 1, done.stdout + done.stderr
    out = done.stdout
    assert "crashed while running 'test_hangs.py::test_hangs'" in out, out
    assert "1 failed, 1 passed" in out, out
