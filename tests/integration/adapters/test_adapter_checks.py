"""QA checks run by T25 itself: pass, fail, timeout, missing command - results, not exceptions."""

from __future__ import annotations

import sys

from adapters.checks import EXCERPT_BYTES, run_check
from core.config.policy_config import QACheck


def check(*code: str, timeout_s: int = 60, required: bool = True) -> QACheck:
    return QACheck(
        name="unit",
        run=[sys.executable, "-c", "\n".join(code)],
        timeout_s=timeout_s,
        required=required,
    )


async def test_a_check_that_exits_zero_passes(tmp_path):
    result = await run_check(check("print('all 12 tests passed')"), tmp_path)
    assert result.passed and result.exit_code == 0 and result.name == "unit"
    assert "all 12 tests passed" in result.excerpt


async def test_a_check_that_exits_non_zero_fails_with_the_tail_of_its_output(tmp_path):
    code = (
        "import sys",
        "print('noise ' * 20_000)",
        "print('FAILED test_login', file=sys.stderr)",
        "sys.exit(1)",
    )
    result = await run_check(check(*code, required=False), tmp_path)
    assert not result.passed and result.exit_code == 1 and result.required is False
    assert result.excerpt.rstrip().endswith("FAILED test_login")
    assert len(result.excerpt.encode()) <= EXCERPT_BYTES


async def test_a_check_printing_past_the_log_bound_still_ends_in_its_failure(tmp_path):
    code = (
        "import os, sys",
        "block = b'noise ' * 11_000 + b'\\n'",
        "for _ in range(1100):",  # 72 MB: past the 64 MiB the log keeps
        "    os.write(1, block)",
        "print('FAILED test_login', file=sys.stderr)",
        "sys.exit(1)",
    )
    result = await run_check(check(*code), tmp_path)
    assert not result.passed and result.excerpt.rstrip().endswith("FAILED test_login")


async def test_a_check_that_runs_too_long_fails_saying_so(tmp_path):
    result = await run_check(
        check("import time", "print('starting', flush=True)", "time.sleep(3600)", timeout_s=1),
        tmp_path,
    )
    assert not result.passed and result.exit_code is None
    assert "starting" in result.excerpt and "timed out after 1 s" in result.excerpt


async def test_a_missing_command_fails_saying_so(tmp_path):
    missing = QACheck(name="lint", run=["t25-no-such-linter", "--strict"])
    result = await run_check(missing, tmp_path)
    assert not result.passed and result.excerpt == "command not found: t25-no-such-linter"


async def test_a_check_runs_in_the_worktree_without_t25_secrets(tmp_path, monkeypatch):
    monkeypatch.setenv("FACTORY_WORKER_CREDENTIAL", "worker-secret")
    code = (
        "import os",
        "print(os.getcwd())",
        "print('LEAKED' if 'FACTORY_WORKER_CREDENTIAL' in os.environ else 'clean')",
    )
    result = await run_check(check(*code), tmp_path)
    assert result.excerpt.split() == [str(tmp_path), "clean"]


async def test_a_required_sandbox_that_cannot_be_had_fails_the_check_and_auto_runs_it(
    tmp_path, monkeypatch
):
    from core.domain.agent import CheckSandbox

    marker = tmp_path / "ran"
    check = QACheck(name="mark", run=[sys.executable, "-c", f"open({str(marker)!r}, 'w')"])
    monkeypatch.setenv("PATH", str(tmp_path))  # no bwrap on this PATH
    refused = await run_check(check, tmp_path, confine=CheckSandbox(kind="required"))
    assert not refused.passed and "sandbox required cannot be had" in refused.excerpt
    assert not marker.exists()
    unconfined = await run_check(check, tmp_path, confine=CheckSandbox(kind="auto"))
    assert unconfined.passed and marker.exists()
