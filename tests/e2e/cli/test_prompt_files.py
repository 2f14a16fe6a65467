"""Big prompts travel through 0600 temp files named after the T25 process that wrote them;
the next `t25 run`, `t25 tui` or `t25 worker` removes the ones a killed T25 left behind,
and never a live process's."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from adapters.prompt_files import PROMPT_FILE_THRESHOLD, prompt_arg
from tests.support import CHECKOUT

HOLDER = textwrap.dedent("""
    import sys, time
    from pathlib import Path
    from adapters.prompt_files import prompt_arg
    with prompt_arg("x" * 200_000, Path(sys.argv[1])) as prompt:
        print(prompt.path, flush=True)
        time.sleep(600)
""")


@pytest.fixture
def tmpdir_(tmp_path: Path) -> Path:
    where = tmp_path / "tmp"
    where.mkdir()
    return where


@pytest.fixture
def holders(tmp_path: Path, tmpdir_: Path):
    """Start real processes in the middle of a run: each has written a big prompt (for a
    worktree beside the temp dir) and waits. All are killed and reaped afterwards."""
    started: list[subprocess.Popen] = []
    worktree = tmp_path / "worktree"
    worktree.mkdir()

    def hold() -> tuple[subprocess.Popen, Path]:
        holder = subprocess.Popen(
            [sys.executable, "-c", HOLDER, str(worktree)],
            stdout=subprocess.PIPE,
            text=True,
            env={**os.environ, "TMPDIR": str(tmpdir_)},
            cwd=CHECKOUT,
        )
        started.append(holder)
        path = Path(holder.stdout.readline().strip())
        assert path.is_file() and path.parent == tmpdir_
        return holder, path

    yield hold
    for holder in started:
        holder.kill()
        holder.wait(timeout=30)
        holder.stdout.close()


def test_a_prompt_file_is_private_and_named_after_its_process(
    tmp_path: Path, tmpdir_: Path, monkeypatch
):
    monkeypatch.setenv("TMPDIR", str(tmpdir_))
    monkeypatch.setattr("tempfile.tempdir", None)  # re-read TMPDIR
    from adapters.prompt_files import sweep_prompt_files

    with prompt_arg("y" * (PROMPT_FILE_THRESHOLD + 1), tmp_path) as prompt:
        assert prompt.path.name.startswith(f"t25-prompt-{os.getpid()}-")
        assert prompt.path.stat().st_mode & 0o777 == 0o600
        assert sweep_prompt_files([tmpdir_]) == []  # this process is alive
        assert prompt.path.is_file()
    assert not prompt.path.exists()


@pytest.mark.parametrize(
    "command", [("run",), ("tui", "--no-workers"), ("worker", "--url", "http://127.0.0.1:9")]
)
def test_a_killed_processs_prompt_file_is_swept_and_a_live_ones_kept(
    t25, tmpdir_, holders, command
):
    killed, left = holders()
    _live, kept = holders()
    killed.send_signal(signal.SIGKILL)
    killed.wait(timeout=30)  # reaped: its pid no longer runs
    assert left.is_file()  # nothing removed it: the process had no chance to
    # No t25.yaml (nor credential) here: each command fails, but only after the sweep.
    done = t25(*command, env={"TMPDIR": str(tmpdir_)})
    assert done.code == 1, done.err
    assert not left.exists()
    assert kept.is_file()
