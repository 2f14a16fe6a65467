"""`t25 completion bash|zsh|fish`: scripts generated from the parser, driven in the real
shells (zsh and fish tests skip where the shell is not installed), completing commands,
options, their values and task ids from `t25 __complete-ids`."""

from __future__ import annotations

import argparse
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from t25_tui.cli.completion import grammar, script
from t25_tui.cli.parser import build_parser

BIN = Path(sys.executable).parent  # t25 itself


def shell(argv: list[str], cwd: Path) -> str:
    env = {**os.environ, "PATH": f"{BIN}:{os.environ['PATH']}"}
    done = subprocess.run(argv, cwd=cwd, env=env, capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, done.stderr
    return done.stdout


def bash(cwd: Path, *words: str) -> list[str]:
    """What bash offers for `words` (the last one being completed)."""
    line = " ".join(f"'{w}'" for w in words)
    body = (
        "source <(t25 completion bash); "
        f"COMP_WORDS=({line}); COMP_CWORD=$((${{#COMP_WORDS[@]}} - 1)); "
        '_t25; printf "%s\\n" "${COMPREPLY[@]}"'
    )
    return shell(["bash", "-c", body], cwd).split()


def zsh(cwd: Path, *words: str) -> list[str]:
    """The same in zsh, with compadd, compdef and _files stood in for by printing."""
    line = " ".join(f"'{w}'" for w in words)
    body = (
        "compdef() {}; _files() { print FILES }; compadd() { shift; print -l -- $@ }; "
        "source <(t25 completion zsh); "
        f"words=({line}); CURRENT=${{#words}}; _t25"
    )
    return shell(["zsh", "-f", "-c", body], cwd).split()


def fish(cwd: Path, line: str) -> list[str]:
    out = shell(
        ["fish", "--no-config", "-c", f"t25 completion fish | source; complete -C '{line}'"], cwd
    )
    return [row.split("\t")[0] for row in out.splitlines()]


@pytest.fixture
def two_tasks(t25, repo) -> Path:
    assert t25("init").code == 0
    assert t25("task", "new", "One").code == 0
    assert t25("task", "new", "Two").code == 0
    return repo


def test_bash_completes_commands_options_values_and_task_ids(two_tasks):
    assert bash(two_tasks, "t25", "ta") == ["task"]
    assert bash(two_tasks, "t25", "task", "") == ["new", "edit", "list", "show"]
    assert bash(two_tasks, "t25", "task", "list", "--st") == ["--state"]
    assert bash(two_tasks, "t25", "task", "list", "--state", "AW") == ["AWAITING_APPROVAL"]
    assert bash(two_tasks, "t25", "approve", "") == ["T-1", "T-2"]
    assert bash(two_tasks, "t25", "--actor", "ana", "cancel", "T-") == ["T-1", "T-2"]
    assert bash(two_tasks, "t25", "audit", "--task", "") == ["T-1", "T-2"]
    assert bash(two_tasks, "t25", "task", "show", "--j") == ["--json"]
    assert bash(two_tasks, "t25", "completion", "") == ["bash", "zsh", "fish"]
    assert bash(two_tasks, "t25", "approve", "--comment", "") == []  # free text


@pytest.mark.skipif(not shutil.which("zsh"), reason="zsh is not installed")
def test_zsh_completes_the_same(two_tasks):
    assert zsh(two_tasks, "t25", "ta") == ["init", "demo", "task", *zsh(two_tasks, "t25", "")[3:]]
    assert zsh(two_tasks, "t25", "task", "") == ["new", "edit", "list", "show"]
    assert "--state" in zsh(two_tasks, "t25", "task", "list", "--")
    assert "AWAITING_APPROVAL" in zsh(two_tasks, "t25", "task", "list", "--state", "")
    assert zsh(two_tasks, "t25", "merge", "") == ["T-1", "T-2"]
    assert zsh(two_tasks, "t25", "--config", "") == ["FILES"]


@pytest.mark.skipif(not shutil.which("fish"), reason="fish is not installed")
def test_fish_completes_the_same(two_tasks):
    assert fish(two_tasks, "t25 ta") == ["task"]
    assert fish(two_tasks, "t25 task ") == ["edit", "list", "new", "show"]
    assert fish(two_tasks, "t25 task list --st") == ["--state"]
    assert "AWAITING_APPROVAL" in fish(two_tasks, "t25 task list --state ")
    assert fish(two_tasks, "t25 retry ") == ["T-1", "T-2"]
    assert fish(two_tasks, "t25 completion ") == ["bash", "fish", "zsh"]


def test_task_ids_are_listed_fast_and_nothing_is_said_without_a_config(t25, two_tasks, tmp_path):
    assert t25("__complete-ids").out.split() == ["T-1", "T-2"]
    elsewhere = tmp_path / "nowhere"
    elsewhere.mkdir()
    done = t25("__complete-ids", cwd=elsewhere)
    assert (done.code, done.out, done.err) == (0, "", "")
    assert "__complete-ids" not in t25("--help").out  # hidden


def test_every_command_and_option_of_the_parser_is_in_every_script():
    parser = build_parser()
    for shell_name in ("bash", "zsh", "fish"):
        text = script(shell_name, parser)
        for command in grammar(parser):
            for word in command.words():
                assert word in text, (shell_name, command.key, word)
            for flag in command.flags():
                assert flag.lstrip("-") in text, (shell_name, command.key, flag)


def test_a_new_subcommand_completes_without_touching_the_generator():
    parser = argparse.ArgumentParser(prog="t25")
    sub = parser.add_subparsers()
    brand_new = sub.add_parser("brand-new", help="a command added later")
    brand_new.add_argument("--colour", choices=("red", "green"))
    brand_new.add_argument("id")
    (root, added) = list(grammar(parser))
    assert root.words() == ["brand-new"]
    assert added.key == "brand-new" and added.takes_id and "--colour" in added.flags()
    assert '"brand-new|--colour") COMPREPLY=($(compgen -W "red green"' in script("bash", parser)
