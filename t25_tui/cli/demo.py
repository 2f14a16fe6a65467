"""`t25 demo`: the pipeline on a sample repository, start to finish, with T25's scripted
agent playing every role; `--tui` opens the cockpit on it instead."""

from __future__ import annotations

import argparse
import asyncio
import os
import shlex
import subprocess
import sys
import tempfile
from pathlib import Path

from core.errors import T25Error
from core.workspace.git import git_sync
from t25_tui.cli.setup import FACTORY_DIR, exclude_from_git
from t25_tui.cli.tui import cockpit

DEMO_CONFIG = """\
# The demo's t25.yaml: T25's own scripted agent plays every role, so the whole pipeline
# runs without a model. In your repository, name real CLIs here (claude, codex, ...).
projects:
  - name: shop
    repo: .
roles:
  spec: [{adapter: scripted}]
  planner: [{adapter: scripted}]
  dev: [{adapter: scripted}]
  qa: [{adapter: scripted}]
  reviewer: [{adapter: scripted, model: scripted-2}]   # not the model that wrote the change
  docs: [{adapter: scripted}]
limits:
  workers: 2
approval:
  require_for_risk: [high]
qa:
  checks:
    - name: unit tests
      run: [PYTHON, -m, unittest, -q]
cost:
  rates:
    scripted-1: {input: 3.0, output: 15.0}
    scripted-2: {input: 3.0, output: 15.0}
"""

_TOUR = [
    ("Set T25 up in the repository: t25.yaml and .factory/", ["init"]),
    (
        (
            "File three tasks. The scripted agent reads directives from a description: the "
            "second plans a high-risk change,\n# the third gets sent back once by review"
        ),
        ["task", "new", "Add a greeting endpoint", "--type", "feat"],
    ),
    (
        None,
        [
            "task",
            "new",
            "Rotate the session signing key",
            "--type",
            "feat",
            "--description",
            "Touches authentication.\nscripted: risk=high",
        ],
    ),
    (
        None,
        [
            "task",
            "new",
            "Validate the page size",
            "--type",
            "fix",
            "--description",
            "Reject sizes over 100.\nscripted: review=changes-once",
        ],
    ),
    ("Work the queue until nothing can move without a human", ["run"]),
    (
        "A merge before the checks and the review have passed is refused, with the reason",
        ["merge", "T-2"],
    ),
    (
        "The high-risk plan waits for a human: approve it (the approval records the plan's hash)",
        ["approve", "T-2", "--comment", "key rotation reviewed with security"],
    ),
    (None, ["run"]),
    ("A task's history, runs, artifacts and cost", ["task", "show", "T-3"]),
    ("Merging is a human action", ["merge", "T-1"]),
    (None, ["merge", "T-2"]),
    (None, ["merge", "T-3"]),
    ("Every decision is in the hash-chained audit log, and the chain verifies", ["audit"]),
    (None, ["audit", "verify"]),
]


def demo(args: argparse.Namespace) -> int:
    if getattr(args, "tui", False):
        return _demo_tui(args)
    if args.dir:
        where = Path(args.dir).resolve()
        if where.exists() and any(where.iterdir()):
            raise T25Error(f"{where} is not empty", hint="give a new or empty directory")
        _tour(where)
        print(f"The demo repository is kept at {where}.")
        return 0
    with tempfile.TemporaryDirectory(prefix="t25-demo-") as tmp:
        _tour(Path(tmp) / "shop")
    return 0


def _tour(repo: Path) -> None:
    from t25_tui.tui.sample_data import make_sample_repo

    repo.mkdir(parents=True, exist_ok=True)
    make_sample_repo(repo)
    print(f"A sample repository at {repo} (default branch: trunk)\n")
    env = {**os.environ, "PYTHONUNBUFFERED": "1"}
    for note, argv in _TOUR:
        if note:
            print(f"# {note}")
        print(f"$ t25 {shlex.join(argv)}", flush=True)
        cmd = [sys.executable, "-m", "t25_tui", "--actor", "demo-operator", *argv]
        subprocess.run(cmd, cwd=repo, env=env, stdin=subprocess.DEVNULL, check=False)
        if argv == ["init"]:
            (repo / "t25.yaml").write_text(DEMO_CONFIG.replace("PYTHON", sys.executable))
            print(
                "(the demo replaces t25.yaml with one where T25's scripted agent plays every role)"
            )
        print(flush=True)
    print("$ git log --oneline --graph trunk")
    print(git_sync("log", "--oneline", "--graph", "trunk", cwd=repo))
    print(
        "\nThat was the tour. In your own repository: t25 init, name your agent CLIs in "
        "t25.yaml, then t25 task new."
    )


def _demo_tui(args: argparse.Namespace) -> int:
    """The sample repository with the tour's tasks filed, and the cockpit open on it."""
    if args.dir:
        where = Path(args.dir).resolve()
        if where.exists() and any(where.iterdir()):
            raise T25Error(f"{where} is not empty", hint="give a new or empty directory")
        return _cockpit_on(where, args)
    with tempfile.TemporaryDirectory(prefix="t25-demo-") as tmp:
        return _cockpit_on(Path(tmp) / "shop", args)


def _cockpit_on(repo: Path, args: argparse.Namespace) -> int:
    from t25_tui.tui.sample_data import make_sample_repo

    repo.mkdir(parents=True, exist_ok=True)
    make_sample_repo(repo)
    (repo / FACTORY_DIR).mkdir(exist_ok=True)
    exclude_from_git(repo, f"/{FACTORY_DIR}/")
    exclude_from_git(repo, "/t25.yaml")
    (repo / "t25.yaml").write_text(DEMO_CONFIG.replace("PYTHON", sys.executable))
    for _, argv in _TOUR:
        if argv[:2] == ["task", "new"]:
            subprocess.run(
                [sys.executable, "-m", "t25_tui", "--actor", "demo-operator", *argv],
                cwd=repo,
                stdin=subprocess.DEVNULL,
                stdout=subprocess.DEVNULL,
                check=True,
            )
    tui_args = argparse.Namespace(
        config=str(repo / "t25.yaml"), actor=args.actor or "demo-operator", debug=args.debug
    )
    code = asyncio.run(cockpit(tui_args))
    print(f"The demo repository was {repo}" + ("" if args.dir else " (now removed)."))
    return code
