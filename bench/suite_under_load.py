"""Does the suite pass on a loaded machine? The whole suite, several times in a row, each on a
clean clone of the committed tree, while a second copy of the suite runs beside it on the same
cores; how long each run took, and what the copy beside it did meanwhile.

Both copies are clones of HEAD (what is committed, not the working tree), each with a virtual
environment of its own, and run the README's test command (`pytest -n auto`) with Postgres and
the real agent CLIs required, as `.ci/run` does; they share the Postgres server (each test
session takes databases of its own) and the pinned CLIs in `.tools/`. The copy beside runs the
suite over and over until the measured runs are done, then is stopped.

Exits 1 when a measured run failed or did not run the suite, so its figures are never read as
a pass that did not happen.

Run:  .venv/bin/python bench/suite_under_load.py [--runs 3] [--beside 1]
      (about 35 minutes a run on 2 loaded cores)
"""

from __future__ import annotations

import argparse
import os
import re
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
SUMMARY = re.compile(r"^=+ (.*(?:passed|failed|error).*) in [0-9.]+s.*=+$", re.MULTILINE)


def _clone(where: Path) -> Path:
    """A clean clone of HEAD with its own environment, beside the pinned CLIs."""
    subprocess.run(["git", "clone", "-q", str(ROOT), str(where)], check=True)
    if (ROOT / ".tools").is_dir():
        (where / ".tools").symlink_to(ROOT / ".tools")
    subprocess.run([sys.executable, "-m", "venv", str(where / ".venv")], check=True)
    pip = [str(where / ".venv" / "bin" / "pip"), "install", "-q", "-e", ".[test]"]
    subprocess.run(pip, cwd=where, check=True)
    return where


def _env() -> dict[str, str]:
    return {
        **os.environ,
        "T25_REQUIRE_PG": "1",
        "T25_REQUIRE_REAL_CLIS": "1",
        "T25_TEST_PG_DSN": os.environ.get(
            "T25_TEST_PG_DSN", "postgresql://postgres@127.0.0.1:5432/postgres"
        ),
    }


PYTEST_ARGS: list[str] = []  # `--only`: a part of the suite instead of all of it


def _suite(clone: Path, log: Path) -> subprocess.Popen[bytes]:
    """The README's test command in `clone`, its output to `log`."""
    python = str(clone / ".venv" / "bin" / "python")
    with log.open("wb") as out:
        return subprocess.Popen(
            [python, "-m", "pytest", "-n", "auto", "-p", "no:cacheprovider", *PYTEST_ARGS],
            cwd=clone,
            env=_env(),
            stdout=out,
            stderr=subprocess.STDOUT,
            start_new_session=True,
        )


def _summary(log: Path) -> str:
    found = SUMMARY.findall(log.read_text(errors="replace"))
    return found[-1] if found else "no summary (the suite did not finish)"


class Beside(threading.Thread):
    """A copy of the suite run over and over, from the moment it starts until `stop`."""

    def __init__(self, clone: Path, name: str, logs: Path) -> None:
        super().__init__(daemon=True)
        self.clone, self.name_, self.logs = clone, name, logs
        self.finished: list[str] = []
        self.halt = threading.Event()
        self.proc: subprocess.Popen[bytes] | None = None

    def run(self) -> None:
        while not self.halt.is_set():
            log = self.logs / f"{self.name_}-{len(self.finished) + 1}.log"
            self.proc = _suite(self.clone, log)
            while self.proc.poll() is None and not self.halt.wait(5):
                pass
            if self.proc.poll() is not None and not self.halt.is_set():
                self.finished.append(f"exit {self.proc.returncode}: {_summary(log)}")

    def stop(self) -> None:
        self.halt.set()
        if self.proc is not None and self.proc.poll() is None:
            os.killpg(self.proc.pid, signal.SIGTERM)
            self.proc.wait()
        self.join()


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=3, help="measured runs in a row")
    parser.add_argument("--beside", type=int, default=1, help="copies running beside them")
    parser.add_argument("--keep", action="store_true", help="keep the clones and logs")
    parser.add_argument("--only", nargs="*", default=[], help="these tests, not the suite")
    args = parser.parse_args()
    PYTEST_ARGS[:] = args.only
    work = Path(tempfile.mkdtemp(prefix="t25-suite-load-"))
    # As a clone anywhere else is: tests run T25's code as the user `nobody` when root.
    work.chmod(0o755)
    head = subprocess.run(
        ["git", "rev-parse", "--short", "HEAD"], cwd=ROOT, capture_output=True, text=True
    ).stdout.strip()
    print(f"commit {head}; clones in {work}", flush=True)
    measured = _clone(work / "measured")
    besides = [
        Beside(_clone(work / f"beside-{i}"), f"beside-{i}", work) for i in range(args.beside)
    ]
    for beside in besides:
        beside.start()
    failed = 0
    try:
        for run in range(1, args.runs + 1):
            log = work / f"measured-{run}.log"
            started = time.monotonic()
            code = _suite(measured, log).wait()
            took = time.monotonic() - started
            said = _summary(log)
            ok = code == 0 and "passed" in said and "failed" not in said
            failed += not ok
            print(f"run {run}: {took / 60:.1f} min, exit {code}: {said}", flush=True)
    finally:
        for beside in besides:
            beside.stop()
    for beside in besides:
        print(f"{beside.name_}: {len(beside.finished)} whole runs finished meanwhile")
        for line in beside.finished:
            print(f"  {line}")
    print(f"{args.runs - failed} of {args.runs} measured runs passed")
    if not args.keep:
        shutil.rmtree(work, ignore_errors=True)
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
