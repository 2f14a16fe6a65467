"""The README says what T25 does: its first lines are the two commands (CI runs the second
verbatim), and the keys its quick start and its cheat sheet name do what they say. The guides
it links to keep up too: the command line's table is the parser's, the cockpit's key table
the cockpit's command table."""

from __future__ import annotations

import argparse
import re

from tests.support import CHECKOUT

ROOT = CHECKOUT
README = (ROOT / "README.md").read_text()
COMMAND_LINE = (ROOT / "docs" / "guides" / "command-line.md").read_text()
COCKPIT = (ROOT / "docs" / "guides" / "cockpit.md").read_text()


def _commands() -> list[str]:
    lines = README.splitlines()
    start = lines.index("```sh") + 1
    return lines[start : lines.index("```", start)]


def test_the_readme_opens_with_exactly_two_commands():
    head = README.splitlines()[:6]
    assert head[2] == "```sh" and head[5] == "```"
    run, test = _commands()
    assert run.startswith("python3 -m venv .venv") and "t25 " in run
    assert test.startswith("python3 -m venv .venv") and "pytest" in test


def test_ci_runs_the_readmes_test_command():
    ci = (ROOT / ".ci" / "run").read_text().splitlines()
    assert _commands()[1] in ci
    assert "export T25_REQUIRE_PG=1" in ci


def test_ci_runs_contributings_gate_before_the_tests():
    ci = (ROOT / ".ci" / "run").read_text().splitlines()
    contributing = (ROOT / "CONTRIBUTING.md").read_text()
    block = contributing.split("## The gate", 1)[1].split("```sh\n", 1)[1].split("```", 1)[0]
    gate = [line.split("#", 1)[0].strip() for line in block.splitlines() if line.strip()]
    assert len(gate) == 4 and all(command in ci for command in gate)
    tests = ci.index(_commands()[1])
    assert all(ci.index(command) < tests for command in gate)


# -- the command table -----------------------------------------------------------------------


def test_the_readme_is_a_front_door():
    """What T25 is, the two commands, a picture, the cheat sheet and links: the rest is in
    docs/, and every page of docs/ the README links to is there."""
    assert len(README.encode()) <= 10_000
    assert "![the board](screenshots/board.svg)" in README
    for page in re.findall(r"\]\((docs/[^)#]+)", README):
        assert (ROOT / page).is_file(), page


def table(header: str, text: str) -> list[tuple[str, str]]:
    """The rows (first cell, second cell) of the table in `text` whose header line is `header`."""
    lines = text.splitlines()
    start = lines.index(header) + 2  # the header and its |---| line
    rows = []
    for line in lines[start:]:
        if not line.startswith("|"):
            break
        cells = re.split(r"(?<!\\)\|", line)[1:-1]
        rows.append((cells[0].strip().replace("\\|", "|"), cells[1].strip()))
    return rows


def subcommands(parser: argparse.ArgumentParser, path: tuple[str, ...] = ()):
    """Every (path, parser) below `parser`: `("task", "new")`, `("audit", "verify")`, …"""
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            for name, sub in action.choices.items():
                yield (*path, name), sub
                yield from subcommands(sub, (*path, name))


def documented_commands() -> list[tuple[tuple[str, ...], set[str]]]:
    """(command path, options shown) for each row of the command table."""
    from t25_tui.cli.parser import build_parser

    parsers = dict(subcommands(build_parser()))
    out = []
    for cell, _ in table("| command | what it does |", COMMAND_LINE):
        words = re.fullmatch(r"`(t25 [^`]+)`", cell)[1].split()[1:]
        path: tuple[str, ...] = ()
        while words and (*path, words[0]) in parsers:
            path = (*path, words.pop(0))
        out.append((path, set(re.findall(r"--[a-z][a-z-]*", " ".join(words)))))
    return out


def test_every_command_in_the_table_exists_with_the_options_it_shows():
    from t25_tui.cli.parser import build_parser

    parsers = dict(subcommands(build_parser()))
    for path, options in documented_commands():
        assert path in parsers, f"t25 {' '.join(path)} is not a command"
        known = {o for action in parsers[path]._actions for o in action.option_strings}
        assert options <= known, f"t25 {' '.join(path)}: no such option {options - known}"


def test_every_command_of_the_parser_is_in_the_table():
    from t25_tui.cli.parser import build_parser

    runnable = {path for path, sub in subcommands(build_parser()) if sub.get_default("handler")}
    assert runnable - {path for path, _ in documented_commands()} == set()


def test_the_global_options_paragraph_names_the_parsers_global_options():
    from t25_tui.cli.parser import build_parser

    top = {o for a in build_parser()._actions for o in a.option_strings if o.startswith("--")}
    paragraph = COMMAND_LINE[COMMAND_LINE.index("Every command takes") :].split("\n\n")[0]
    assert set(re.findall(r"`(--[a-z]+)", paragraph)) == top - {"--help"}
    assert "before\nthe command or after it" in paragraph


# -- the cockpit's keys ------------------------------------------------------------------------

# How the documentation writes a key, as Textual names it.
KEY_NAMES = {
    "←": "left",
    "→": "right",
    "↑": "up",
    "↓": "down",
    "?": "question_mark",
    "/": "slash",
    "[": "left_square_bracket",
    "]": "right_square_bracket",
}
# Keys no command of the table holds: moving in a list (the widget's), and the app's own
# `key_escape` that clears the filter.
WIDGET_KEYS = {"up", "down", "escape"}


def toolkit_keys() -> set[str]:
    """Keys Textual binds for every app: the command palette, quitting, interrupting."""
    from textual.app import App

    from t25_tui.tui.app import T25App

    return {T25App.COMMAND_PALETTE_BINDING} | {
        b.key for b in App.BINDINGS if not isinstance(b, tuple)
    }


def documented_keys() -> set[str]:
    keys = set()
    for cell, _ in table("| key | what it does |", COCKPIT):
        keys |= {KEY_NAMES.get(k, k) for k in re.findall(r"`([^`]+)`", cell)}
        keys |= {f.lower() for f in re.findall(r"\bF\d+\b", cell)}
    return keys


def test_every_key_the_board_answers_is_in_the_key_table():
    """The commands of the app (on every screen) and of the board, from the one table."""
    from t25_tui.tui.commands import Node, commands_on

    board_keys = {k for node in (Node.APP, Node.BOARD) for c in commands_on(node) for k in c.keys}
    assert board_keys - documented_keys() == set()


def test_every_key_in_the_key_table_is_a_commands_or_the_toolkits():
    from t25_tui.tui.commands import COMMANDS

    bound = {key for c in COMMANDS for key in c.keys} | WIDGET_KEYS | toolkit_keys()
    assert documented_keys() - bound == set()


def runs(screen: str, key: str) -> str:
    """The command `key` runs on `screen`: the screen's own, else the app's."""
    from t25_tui.tui.commands import Node, commands_on

    for node in (Node[screen], Node.APP):
        for command in commands_on(node):
            if key in command.keys:
                return command.id
    raise AssertionError(f"{key} runs nothing on {screen}")


def test_the_quick_start_keys_do_what_it_says():
    quick = README.split("\n\n")[2]  # the paragraph after the two commands
    keys = re.findall(r"`([a-z])`", quick)
    assert keys == ["i", "a", "a", "m", "y", "q"]
    # What each one does, on the screen it is pressed in: the board opens the inbox, the
    # inbox opens the task's decision, the approval dialog approves, the board (or inbox)
    # merges, the confirmation confirms, and the app quits.
    assert [
        runs("BOARD", "i"),
        runs("INBOX", "a"),
        runs("APPROVAL", "a"),
        runs("BOARD", "m"),
        runs("CONFIRM", "y"),
        runs("BOARD", "q"),
    ] == ["inbox", "decide", "approval.approve", "merge", "confirm.yes", "quit"]


def test_the_readmes_five_keys_do_what_it_says():
    """The cheat sheet's keys, pressed on the board, run the commands it describes."""
    from t25_tui.tui.commands import BY_ID

    rows = table("| key | on the board |", README)
    keys = [KEY_NAMES.get(key.strip("`"), key.strip("`")) for key, _ in rows]
    assert [runs("BOARD", key) for key in keys] == ["inbox", "decide", "merge", "new_task", "help"]
    for key, (_, said) in zip(keys, rows, strict=True):
        assert BY_ID[runs("BOARD", key)].description in said, key
