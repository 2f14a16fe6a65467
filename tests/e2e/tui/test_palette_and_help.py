"""One table of commands feeds every screen's bindings, the command palette and the help
screen; each command's keys work over SSH."""

from __future__ import annotations

import string

from textual.keys import _character_to_key, _normalize_key_list
from textual.widgets._footer import FooterKey

from core.config.keys import key_name
from t25_tui.tui.app import T25App
from t25_tui.tui.commands import BY_ID, COMMANDS, Node, commands_on
from t25_tui.tui.screens.detail import TaskDetailScreen
from t25_tui.tui.screens.dialogs import (
    AnswerDialog,
    ApprovalDialog,
    ConfirmDialog,
    MergeDialog,
    MessageDialog,
)
from t25_tui.tui.screens.diff import DiffScreen
from t25_tui.tui.screens.help import HelpScreen
from t25_tui.tui.screens.inbox import Inbox
from t25_tui.tui.screens.new_task import NewTaskDialog
from t25_tui.tui.screens.panes import AuditPane, CostPane, ProfilesPane
from t25_tui.tui.widgets.board import Board
from tests.support.cockpit import app_for, help_rows, settle_board, until
from tests.support.screen_text import screen_text

# The classes that bind each node's keys.
BOUND_BY = {
    Node.APP: [T25App],
    Node.BOARD: [Board],
    Node.DETAIL: [TaskDetailScreen],
    Node.DIFF: [DiffScreen],
    Node.INBOX: [Inbox],
    Node.PANES: [CostPane, AuditPane, ProfilesPane],
    Node.APPROVAL: [ApprovalDialog],
    Node.ANSWER: [AnswerDialog],
    Node.CONFIRM: [ConfirmDialog],
    Node.MERGE: [MergeDialog],
    Node.MESSAGE: [MessageDialog],
    Node.NEW_TASK: [NewTaskDialog],
    Node.HELP: [HelpScreen],
}


def test_every_class_binds_exactly_its_commands_from_the_table():
    assert set(BOUND_BY) == set(Node)
    for node, classes in BOUND_BY.items():
        for cls in classes:
            table = [(c.id, ",".join(c.keys), c.action, c.description) for c in commands_on(node)]
            bound = [(b.id, b.key, b.action, b.tooltip) for b in cls.BINDINGS]
            assert bound == table, cls.__name__


def test_every_command_runs_an_action_that_exists_where_it_is_bound():
    for node, classes in BOUND_BY.items():
        for cls in classes:
            for command in commands_on(node):
                namespace, _, action = command.action.rpartition(".")
                target = T25App if namespace == "app" else cls
                name = action.partition("(")[0]
                assert callable(getattr(target, f"action_{name}", None)), (cls, command.id)


def test_every_default_key_works_over_ssh_and_is_named_as_textual_names_it():
    for command in COMMANDS:
        assert command.keys, command.id
        for key in command.keys:
            assert key_name(key) == key == _normalize_key_list(key), (command.id, key)


def test_the_configuration_names_a_typed_key_as_textual_does():
    for char in string.punctuation + string.ascii_lowercase + string.digits:
        assert key_name(char) == _character_to_key(char), char


async def test_the_footer_shows_each_commands_description_as_its_tooltip(seeded):
    app = app_for(seeded)
    async with app.run_test(size=(120, 36)) as pilot:
        await settle_board(app, pilot)
        await pilot.press("enter")  # the board's own open key: the task detail
        await until(pilot, lambda: isinstance(app.screen, TaskDetailScreen) and app.screen.ready)
        await pilot.pause()
        shown = {key.action: key.tooltip for key in app.screen.query(FooterKey)}
        for node in (Node.DETAIL, Node.APP):
            for command in commands_on(node):
                if command.show and command.action in shown:
                    assert shown[command.action] == command.description, command.id
        assert shown["follow_log"] == BY_ID["log.follow"].description
        assert shown["inbox"] == BY_ID["inbox"].description


async def test_the_palette_lists_every_command_with_its_keys_and_runs_it(seeded):
    app = app_for(seeded)
    async with app.run_test(size=(80, 24)) as pilot:
        await settle_board(app, pilot)
        palette = {c.title: c for c in app.get_system_commands(app.screen)}
        for command in COMMANDS:
            if command.title is not None:
                entry = palette[f"T25: {command.title}"]
                assert entry.help == f"{command.description} ({app.keymap.shown(command.id)})"
        assert palette["T25: Help"].help.endswith("(? / F1)")
        await palette["T25: Cost"].callback()
        await until(pilot, lambda: isinstance(app.screen, CostPane) and app.screen.ready)


async def test_while_a_dialog_is_open_the_palette_runs_only_quit_of_the_cockpits(seeded):
    app = app_for(seeded)
    async with app.run_test(size=(120, 36)) as pilot:
        await settle_board(app, pilot)
        assert app.board.focus_task("T-2")
        await pilot.press("a")
        await until(pilot, lambda: isinstance(app.screen, ApprovalDialog))
        dialog = app.screen
        palette = {c.title: c for c in app.get_system_commands(app.screen)}
        for command in COMMANDS:
            if command.title is not None and command.id != "quit":
                await palette[f"T25: {command.title}"].callback()
                await pilot.pause()
                assert app.screen is dialog, command.id
        await palette["T25: Quit"].callback()
        await until(pilot, lambda: not app.is_running)


async def test_the_help_screen_lists_every_command_with_its_keys_and_id(seeded):
    app = app_for(seeded)
    async with app.run_test(size=(120, 140)) as pilot:
        await settle_board(app, pilot)
        await pilot.press("question_mark")
        await until(pilot, lambda: isinstance(app.screen, HelpScreen))
        await pilot.pause()
        text = screen_text(app)
        assert help_rows(text) == {c.id: app.keymap.shown(c.id) for c in COMMANDS}
        assert help_rows(text)["help"] == "? / F1" and help_rows(text)["back"] == "esc"
        assert "ctrl+p" in text and "the command palette" in text
        await pilot.press("f1")  # the help key closes it again
        await until(pilot, lambda: not isinstance(app.screen, HelpScreen))


async def test_the_panes_open_from_their_keys(seeded):
    app = app_for(seeded)
    async with app.run_test(size=(80, 24)) as pilot:
        await settle_board(app, pilot)
        for key, pane in (
            ("c", CostPane),
            ("u", AuditPane),
            ("p", ProfilesPane),
            ("f5", CostPane),
            ("f6", AuditPane),
            ("f7", ProfilesPane),
        ):
            await pilot.press(key)
            await until(pilot, lambda pane=pane: isinstance(app.screen, pane) and app.screen.ready)
        assert "chain verified" not in screen_text(app)  # the agents pane is on top
        await pilot.press(*BY_ID["audit"].keys[:1])
        await until(pilot, lambda: isinstance(app.screen, AuditPane) and app.screen.ready)
        assert "chain verified" in str(app.screen.query_one("#audit-status").render())
