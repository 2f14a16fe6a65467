"""How long an adapter takes to read a large output, and how many times it parses it.

Each real CLI's captured output (tests/contract/adapters/captures/) is made into a long
session - the middle of its successful capture repeated to about MB megabytes, then the capture itself - and
handed to `CliAdapter` as a process that exited 0 (a success) or 1 (its quota, its overload).
Printed per case: the spec's `parse` calls per run and the CPU time to turn the output into an
`AgentResult`, the least of N runs (CPU time, so that other load on the machine counts little). With `--against REV` the same is measured on git revision REV, side by side.
It exits non-zero unless each output was the size asked, was parsed at least once a run and
came out as its capture says (a success, a quota error, an overload).
Run by hand:

    .venv/bin/python bench/adapter_parse.py [--mb 8] [-n 5] [--against main]
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from checked import happened

REPO = Path(__file__).resolve().parents[1]
CAPTURES = REPO / "tests" / "contract" / "adapters" / "captures"
# (spec class, its successful capture, the capture measured, the exit status it is given)
CASES = [
    ("claude.ClaudeSpec", "claude/write-tool.stream.jsonl", "claude/write-tool.stream.jsonl", 0),
    ("claude.ClaudeSpec", "claude/write-tool.stream.jsonl", "claude/err-429.stream.jsonl", 1),
    ("claude.ClaudeSpec", "claude/write-tool.stream.jsonl", "claude/err-529.stream.jsonl", 1),
    ("codex.CodexSpec", "codex/apply-patch.jsonl", "codex/apply-patch.jsonl", 0),
    ("codex.CodexSpec", "codex/apply-patch.jsonl", "codex/err-429.jsonl", 1),
    ("codex.CodexSpec", "codex/apply-patch.jsonl", "codex/err-529.jsonl", 1),
    ("gemini.GeminiSpec", "gemini/ok.stream-json.jsonl", "gemini/ok.stream-json.jsonl", 0),
    ("gemini.GeminiSpec", "gemini/ok.stream-json.jsonl", "gemini/err-429.stream-json.jsonl", 1),
    ("gemini.GeminiSpec", "gemini/ok.stream-json.jsonl", "gemini/err-529.stream-json.jsonl", 1),
    ("opencode.OpencodeSpec", "opencode/ok.json-events.jsonl", "opencode/ok.json-events.jsonl", 0),
    (
        "opencode.OpencodeSpec",
        "opencode/ok.json-events.jsonl",
        "opencode/err-429.json-events.jsonl",
        1,
    ),
    ("aider.AiderSpec", "aider/ok.stdout.txt", "aider/ok.stdout.txt", 0),
    ("aider.AiderSpec", "aider/ok.stdout.txt", "aider/err-429.stdout.txt", 1),
]


def long_session(ok: str, capture: str, megabytes: float) -> str:
    """`capture`, after the middle of the successful capture `ok` repeated to the size."""
    middle = "".join(ok.splitlines(keepends=True)[1:-1])
    return middle * max(int(megabytes * 2**20 / len(middle)), 1) + capture


def expected_outcome(capture: str) -> str:
    """What a capture must come out as: its name says which error it holds, if any."""
    return "quota" if "429" in capture else "overload" if "529" in capture else "ok"


def measure(root: Path, megabytes: float, runs: int) -> None:
    """One JSON line per case on stdout, measured with the adapters found under `root`."""
    sys.path.insert(0, str(root))
    from importlib import import_module

    from adapters.base import CliAdapter
    from adapters.process import ProcessResult
    from core.domain.agent import AgentRequest
    from core.domain.models import TaskState

    request = AgentRequest(
        task_id="T-1",
        run_id="R-1",
        role="dev",
        stage=TaskState.IMPLEMENTING,
        prompt="p",
        cwd=Path("/tmp"),
    )
    for spec_name, ok, capture, code in CASES:
        module, name = spec_name.split(".")
        spec_type = getattr(import_module(f"adapters.{module}"), name)

        class Counted(spec_type):  # each spec in turn
            parses = 0

            def parse(self, stdout: str) -> object:
                self.parses += 1
                return super().parse(stdout)

        stdout = long_session(
            (CAPTURES / ok).read_text(encoding="utf-8"),
            (CAPTURES / capture).read_text(encoding="utf-8"),
            megabytes,
        ).encode()
        done = ProcessResult(exit_code=code, stdout=stdout, stderr=b"", log=b"")
        spec = Counted()
        adapter = CliAdapter(spec)
        seconds = []
        for _ in range(runs):
            started = time.process_time()
            result = adapter._result(request, "x", done)
            seconds.append(time.process_time() - started)
        outcome = result.failure.value if result.failure else "ok"
        wanted = expected_outcome(capture)
        size = len(stdout) / 2**20  # near the size asked: whole repeats of the middle
        happened(
            outcome == wanted and spec.parses >= runs and size >= 0.9 * megabytes,
            f"{capture} exit {code} ({size:.2f} of {megabytes} MiB) came out {outcome!r}, "
            f"not {wanted!r}, after {spec.parses} parses in {runs} runs",
        )
        line = {
            "case": f"{capture} exit {code}",
            "mb": len(stdout) / 2**20,
            "parses": spec.parses / runs,
            "ms": min(seconds) * 1000,
            "outcome": outcome,
        }
        print(json.dumps(line), flush=True)


def measured(root: Path, megabytes: float, runs: int) -> list[dict[str, object]]:
    """`measure` in a fresh interpreter, so that it imports the adapters under `root`."""
    done = subprocess.run(
        [sys.executable, __file__, "--measure", str(root), "--mb", str(megabytes), "-n", str(runs)],
        capture_output=True,
        text=True,
        cwd=root,
    )
    if done.returncode != 0:
        raise SystemExit(f"measuring {root}: {(done.stderr.strip().splitlines() or ['?'])[-1]}")
    return [json.loads(line) for line in done.stdout.splitlines()]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--mb", type=float, default=8.0, help="size of each output (MiB)")
    parser.add_argument("-n", type=int, default=5, help="runs per case (the least is shown)")
    parser.add_argument("--against", metavar="REV", help="a git revision to compare with")
    parser.add_argument("--measure", metavar="ROOT", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.measure:
        measure(Path(args.measure), args.mb, args.n)
        return
    here = measured(REPO, args.mb, args.n)
    there: list[dict[str, object]] = []
    if args.against:
        with tempfile.TemporaryDirectory(prefix="t25-bench-") as tree:
            archive = subprocess.run(
                ["git", "-C", str(REPO), "archive", args.against],
                capture_output=True,
                check=True,
            )
            subprocess.run(["tar", "-x", "-C", tree], input=archive.stdout, check=True)
            there = measured(Path(tree), args.mb, args.n)
    header = f"{'case':44} {'MiB':>5} {'outcome':>8} {'parses':>6} {'CPU ms':>8}"
    if there:
        header += f"   {args.against + ' parses':>14} {'CPU ms':>8}"
    print(header)
    for now, then in zip(here, there or [None] * len(here), strict=True):
        row = (
            f"{now['case']:44} {now['mb']:5.1f} {now['outcome']:>8} "
            f"{now['parses']:6g} {now['ms']:8.1f}"
        )
        if then is not None:
            row += f"   {then['parses']:14g} {then['ms']:8.1f}"
        print(row)


if __name__ == "__main__":
    main()
