"""The real `t25` command line: global options in either place, a reader that goes away,
exit statuses a script can act on, and refusals that name what is known."""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import re
import sqlite3
import subprocess
import sys
from pathlib import Path

import pytest

from t25_tui.cli.parser import build_parser

SCRIPTED = """\
projects: [{name: shop, repo: .}]
roles:
  spec: [{adapter: scripted}]
  planner: [{adapter: scripted}]
  dev: [{adapter: scripted%s}]
  qa: [{adapter: scripted}]
  reviewer: [{adapter: scripted, model: scripted-2}]  # not the dev's model
  docs: [{adapter: scripted}]
"""


def actors(repo: Path) -> list[str]:
    lines = (repo / ".factory" / "audit.jsonl").read_text().splitlines()
    return [json.loads(line)["actor"] for line in lines]


def subcommands(parser: argparse.ArgumentParser, path: tuple[str, ...] = ()):
    """Every (path, parser) below `parser`: `("task", "new")`, `("audit", "verify")`, …"""
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            for name, sub in action.choices.items():
                yield (*path, name), sub
                yield from subcommands(sub, (*path, name))


# -- global options ---------------------------------------------------------------------------


def test_every_command_takes_the_global_options_after_it():
    for path, sub in subcommands(build_parser()):
        options = {o for action in sub._actions for o in action.option_strings}
        assert {"--config", "--actor", "--debug"} <= options, path


def test_actor_before_or_after_the_command_and_the_later_one_wins(t25, repo):
    assert t25("init").code == 0
    for n in (1, 2, 3):
        assert t25("task", "new", f"task {n}").code == 0
    assert t25("cancel", "T-1", "--actor", "alice").code == 0
    assert t25("--actor", "bob", "cancel", "T-2").code == 0
    assert t25("--actor", "bob", "cancel", "T-3", "--actor", "carol").code == 0
    claimed = [actor.rpartition(" (claimed ")[2].rstrip(")") for actor in actors(repo)]
    assert claimed == ["alice", "bob", "carol"]


def test_the_actor_is_who_ran_the_command_and_actor_is_recorded_as_claimed(t25, repo):
    """Locally, the OS user with the git identity decides; `--actor` cannot replace them,
    only stand beside them as a claim (as a REST body's actor stands beside its token's
    name)."""
    import getpass

    assert t25("init").code == 0
    for title in ("One", "Two"):
        assert t25("task", "new", title).code == 0
    me = f"{getpass.getuser()} (Test Operator <operator@t25.invalid>)"
    assert t25("cancel", "T-1").code == 0
    assert t25("cancel", "T-2", "--actor", "ana").code == 0
    assert actors(repo) == [me, f"{me} (claimed ana)"]
    assert f"by {me} (claimed ana)" in t25("task", "show", "T-2").out


def test_config_before_or_after_the_command_and_the_later_one_wins(t25, repo):
    other = repo / "elsewhere"
    other.mkdir()
    (other / "t25.yaml").write_text(
        "projects: [{name: other, repo: ..}]\nstore: {url: 'sqlite:///other.db'}\n"
    )
    assert t25("task", "new", "filed over there", "--config", "elsewhere/t25.yaml").code == 0
    assert (other / "other.db").is_file()
    for args in (
        ("--config", "elsewhere/t25.yaml", "task", "list"),
        ("task", "list", "--config", "elsewhere/t25.yaml"),
        ("--config", "missing.yaml", "task", "list", "--config", "elsewhere/t25.yaml"),
    ):
        done = t25(*args)
        assert done.code == 0 and "filed over there" in done.out, (args, done.err)
    done = t25("--config", "elsewhere/t25.yaml", "task", "list", "--config", "missing.yaml")
    assert done.code == 1 and "missing.yaml: no such file" in done.err


@pytest.mark.parametrize(
    "args",
    [("--debug", "task", "list"), ("task", "list", "--debug"), ("audit", "verify", "--debug")],
)
def test_debug_before_or_after_the_command(t25, args):
    done = t25(*args)  # no t25.yaml here: a deliberate error, shown with its traceback
    assert done.code != 0 and "Traceback" in done.err and "ConfigError" in done.err


# -- a reader that goes away ------------------------------------------------------------------


def file_many_tasks(repo: Path, count: int) -> None:
    """`count` tasks through the ControlPlane itself: quicker than `count` processes."""
    from core.config.schema import load_config
    from core.control.service import ControlPlane
    from store import open_store

    async def go() -> None:
        config = load_config(repo / "t25.yaml")
        store = await open_store(config.store_url)
        try:
            control = ControlPlane(config, store)
            await control.sync_projects()
            for n in range(count):
                await control.new_task(f"task number {n} with a title of some length", actor="test")
        finally:
            await store.close()

    asyncio.run(go())


def test_a_closed_pipe_ends_task_list_quietly_like_cat(t25, repo, tmp_path):
    assert t25("init").code == 0
    file_many_tasks(repo, 3000)  # some 200 KB of output: far more than a pipe holds
    errors = tmp_path / "stderr"
    done = subprocess.run(
        [
            "bash",
            "-c",
            f"set -o pipefail; {sys.executable} -m t25_tui task list 2>{errors} | head -1",
        ],
        cwd=repo,
        capture_output=True,
        text=True,
        stdin=subprocess.DEVNULL,
        timeout=120,
    )
    assert done.stdout.split() == ["ID", "STATE", "TYPE", "AGE", "TITLE"]
    assert errors.read_text() == ""
    assert done.returncode == 141  # 128 + SIGPIPE, as for `cat` killed by SIGPIPE


def test_a_closed_pipe_stops_t25_run_and_hands_its_runs_back(t25, repo, tmp_path):
    assert t25("init").code == 0
    (repo / "t25.yaml").write_text(SCRIPTED % ", args: [--misbehave, 'slow:2']")
    assert t25("task", "new", "one").code == 0 and t25("task", "new", "two").code == 0
    errors = tmp_path / "stderr"
    done = subprocess.run(
        ["bash", "-c", f"set -o pipefail; {sys.executable} -m t25_tui run 2>{errors} | head -1"],
        cwd=repo,
        capture_output=True,
        text=True,
        stdin=subprocess.DEVNULL,
        timeout=120,
    )
    assert done.returncode == 141 and errors.read_text() == ""
    assert done.stdout.startswith("T-") and done.stdout.count("\n") == 1
    db = sqlite3.connect(repo / ".factory" / "t25.db")
    try:
        statuses = {row[0] for row in db.execute("SELECT status FROM runs")}
    finally:
        db.close()
    assert "running" not in statuses  # each run was handed back, none left leased
    assert "FAILED" not in t25("task", "list").out


# -- exit statuses ----------------------------------------------------------------------------


def test_run_exits_non_zero_when_a_task_it_worked_failed(t25, repo):
    assert t25("init").code == 0
    (repo / "t25.yaml").write_text(SCRIPTED % ", args: [--misbehave, 'exit:4']")
    assert t25("task", "new", "Doomed").code == 0
    ran = t25("run")
    assert ran.code == 3, ran.err  # 3: a task failed (1 is an error of T25's, 2 of usage)
    assert "T-1  IMPLEMENTING → FAILED" in ran.out
    assert "waiting for a human:" in ran.out and "t25 retry T-1" in ran.out  # the summary
    assert "1 task(s) failed in this run: T-1" in ran.out

    # The next run works nothing: the task failed before it, so it exits 0.
    again = t25("run")
    assert again.code == 0 and "t25 retry T-1" in again.out


def test_task_list_names_the_known_projects_for_an_unknown_one(t25):
    assert t25("init").code == 0
    done = t25("task", "list", "--project", "nope")
    assert done.code == 1
    assert "unknown project 'nope' (known: app)" in done.err and "hint:" in done.err
    assert t25("task", "list", "--project", "app").code == 0


def test_task_show_warns_on_each_corrupted_artifact(t25, repo):
    assert t25("init").code == 0
    (repo / "t25.yaml").write_text(SCRIPTED % "")
    assert t25("task", "new", "Something").code == 0
    assert t25("run").code == 0
    assert t25("task", "show", "T-1").code == 0
    db = sqlite3.connect(repo / ".factory" / "t25.db")
    try:
        with db:
            plan_id, plan_sha = db.execute(
                "SELECT id, sha256 FROM artifacts WHERE kind = 'plan'"
            ).fetchone()
            log_id, log_sha = db.execute(
                "SELECT id, sha256 FROM artifacts WHERE kind = 'log' LIMIT 1"
            ).fetchone()
            for sha in (plan_sha, log_sha):  # as tests/support/backends.py tampers a blob
                db.execute(
                    "UPDATE blobs SET content = CAST(content || x'00' AS BLOB) WHERE sha256 = ?",
                    (sha,),
                )
    finally:
        db.close()

    shown = t25("task", "show", "T-1")
    assert shown.code == 1
    lines = shown.out.splitlines()
    for aid in (f"A-{plan_id}", f"A-{log_id}"):  # a corrupted log is listed, not counted
        at = next(i for i, line in enumerate(lines) if line.strip().startswith(aid + " "))
        assert lines[at + 1].strip().startswith(f"warning: artifact {aid} is corrupted")
    assert sum("warning:" in line for line in lines) == 2
    assert "2 of T-1's artifacts no longer match their SHA-256" in shown.err
    rest = [line.split()[0] for line in lines if line and not line.startswith(" ")]
    assert rest[-3:] == ["cost", "tokens", "spend"]  # the rest still shown


# -- the configuration, as the command line reports it -------------------------------------------


def test_an_unknown_adapter_is_refused_with_the_known_names(t25, repo):
    (repo / "t25.yaml").write_text(
        "projects: [{name: app}]\nroles:\n  dev:\n    - adapter: clade\n"
    )
    done = t25("task", "list")
    assert done.code == 1
    assert (
        "t25.yaml:4: roles.dev[0].adapter: unknown adapter 'clade' (known: aider, "
        "claude, codex, gemini, opencode, scripted); did you mean 'claude'?"
    ) in done.err


def test_a_repo_that_does_not_exist_is_a_config_error_not_missing_git(t25, repo):
    (repo / "t25.yaml").write_text("projects:\n  - name: app\n    repo: ../gone\n")
    done = t25("task", "list")
    assert done.code == 1 and "git is not installed" not in done.err
    assert f"t25.yaml:3: projects[0].repo: {repo.parent / 'gone'} does not exist" in done.err


def test_a_repo_that_is_not_a_git_repository_says_so(t25, repo, tmp_path):
    plain = tmp_path / "plain"
    plain.mkdir()
    (repo / "t25.yaml").write_text(f"projects:\n  - name: app\n    repo: {plain}\n")
    done = t25("task", "list")
    assert done.code == 1 and f"{plain} is not a git repository" in done.err


def test_doctor_before_init_checks_what_init_would_configure(t25, repo):
    done = t25("doctor", env={"PATH": os.defpath})
    assert "no t25.yaml here yet" in done.out and "t25 init" in done.out
    assert "claude" in done.out and "codex" in done.out
    assert done.code == 1  # neither CLI is on that PATH
    assert not (repo / "t25.yaml").exists()


def test_t25_run_keeps_a_live_line_per_run_on_a_terminal_and_plain_lines_when_piped(t25, repo):
    from tests.support.terminal import Terminal

    assert t25("init").code == 0
    (repo / "t25.yaml").write_text(SCRIPTED % ", args: [--misbehave, 'slow:2']")
    assert t25("task", "new", "one").code == 0
    term = Terminal(repo, command="run")
    try:
        term.wait_for("⟳ T-1 IMPLEMENTING", timeout=90)  # the run going on, at the foot
        assert re.search(r"⟳ T-1 IMPLEMENTING R-\d+ on scripted +\d+\.\d s", term.text())
        assert b"\x1b[1F\x1b[J" in term.raw  # redrawn in place, not scrolled
        assert term.wait_exit(120) == 0
    finally:
        term.kill()
    assert t25("task", "new", "two").code == 0
    piped = t25("run")
    assert piped.code == 0 and "⟳" not in piped.out and "\x1b[" not in piped.out
