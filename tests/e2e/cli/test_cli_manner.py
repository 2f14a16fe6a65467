"""The command line explains itself: "did you mean" for a mistyped command or choice, internal
commands out of sight, `t25 --help` grouped with an example under every command's help,
`t25 doctor` problems first within 100 columns, `t25 serve` on a used port as one T25 error,
and the quick reads of `t25 task list` and the completion's ids saying what the full path
says. All through the real binary."""

from __future__ import annotations

import re
import socket

import yaml

from tests.support.waiting import free_port

CONFIG = {
    "projects": [{"name": "app"}],
    "roles": {
        role: [{"adapter": "scripted", "model": "s2" if role == "reviewer" else "s1"}]
        for role in ("spec", "planner", "dev", "qa", "reviewer", "docs")
    },
}


def test_a_mistyped_command_gets_the_nearest_and_no_internal_one(t25):
    done = t25("mrege", "T-1")
    assert done.code == 2
    assert "invalid command: 'mrege'; did you mean 'merge'?" in done.err
    assert "__complete" not in done.err
    done = t25("task", "lsit")
    assert "did you mean 'list'?" in done.err


def test_a_mistyped_choice_gets_the_nearest(t25):
    done = t25("task", "list", "--state", "DONNE")
    assert done.code == 2
    assert "invalid choice: 'DONNE'; did you mean 'DONE'?" in done.err
    done = t25("completion", "bsh")
    assert "did you mean 'bash'?" in done.err


def test_help_is_grouped_and_every_command_has_an_example(t25):
    done = t25("--help")
    assert done.code == 0
    assert "__complete" not in done.out
    for group in ("getting started:", "tasks:", "decisions:", "when a task goes wrong:"):
        assert group in done.out
    assert all(len(line) <= 100 for line in done.out.splitlines())
    commands = re.findall(r"^  ([a-z]+)  ", done.out, re.MULTILINE)
    assert {"init", "merge", "approve", "doctor", "task", "serve"} <= set(commands)
    for command in commands:
        shown = t25(command, "--help")
        assert shown.code == 0, command
        assert re.search(r"^example:\n  \$ (t25 |source )", shown.out, re.MULTILINE), command


def test_doctor_puts_problems_first_within_100_columns(t25, repo):
    config = {**CONFIG, "roles": {**CONFIG["roles"], "dev": [{"adapter": "nosuch"}]}}
    (repo / "t25.yaml").write_text(yaml.safe_dump(config))
    done = t25("doctor")
    assert done.code == 1
    lines = done.out.splitlines()
    assert all(len(line) <= 100 for line in lines), max(lines, key=len)
    assert lines[2].startswith("✗ ") and "problem" in lines[2]
    assert lines.index("checked:") > 2
    assert any(line.startswith("  ✓ git ") for line in lines)
    assert any(line.startswith("  ✗ dev ") for line in lines)
    assert "adapter  " not in done.out  # the wide table is behind --verbose
    wide = t25("doctor", "--verbose")
    assert re.search(r"^adapter\s+found\s+version", wide.out, re.MULTILINE)


def test_doctor_with_nothing_wrong_says_so_first(t25, repo):
    (repo / "t25.yaml").write_text(yaml.safe_dump(CONFIG))
    done = t25("doctor")
    assert done.code == 0, done.out
    assert done.out.splitlines()[2].startswith("✓ problems: none")


def test_serve_on_a_used_port_is_one_t25_error_with_a_hint(t25, repo):
    (repo / "t25.yaml").write_text(yaml.safe_dump(CONFIG))
    port = free_port()
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", port))
        taken.listen()
        done = t25("serve", "--bind", f"127.0.0.1:{port}")
    assert done.code == 1
    assert done.err.splitlines() == [
        (
            f"t25: error: serve cannot listen on 127.0.0.1:{port}: the address is in use "
            "(another `t25 serve`, or another program)"
        ),
        (
            f"  hint: choose another port (--bind 127.0.0.1:{port + 1}, or serve.bind in "
            f"t25.yaml), or stop what listens there (`ss -ltnp 'sport = :{port}'` names it)"
        ),
    ]
    assert "control plane on" not in done.out


def aged(out: str) -> str:
    """The list with its ages masked: a second may pass between two runs."""
    return re.sub(r" +\d+[smhd]  ", " AGE  ", out)


def test_the_quick_task_list_and_ids_say_what_the_full_path_says(t25, repo):
    (repo / "t25.yaml").write_text(yaml.safe_dump(CONFIG))
    assert t25("task", "list").out.startswith("no tasks yet")
    for title in ("Add a greeting", "Fix the footer", "Drop the old page"):
        assert t25("task", "new", title).code == 0
    assert t25("task", "new", "After it", "--after", "T-1", "--priority", "5").code == 0
    assert t25("cancel", "T-3").code == 0
    assert t25("archive", "T-3").code == 0
    full = ["--config", str(repo / "t25.yaml")]  # --config takes the control plane's path
    for args in ([], ["--all"], ["--state", "received"], ["--state", "DONE"]):
        quick, slow = t25("task", "list", *args), t25("task", "list", *args, *full)
        assert quick.code == slow.code == 0
        assert aged(quick.out) == aged(slow.out), args
    assert "(archived)" in t25("task", "list", "--all").out
    assert "[priority 5] (after T-1)" in t25("task", "list").out
    ids = t25("__complete-ids")
    assert ids.out.split() == ["T-1", "T-2", "T-4"]
    assert ids.out == t25("__complete-ids", *full).out
