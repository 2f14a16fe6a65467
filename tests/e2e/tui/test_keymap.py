"""`keys:` in t25.yaml moves the cockpit's commands to other keys: the new key runs the
command and the old one no longer does, the help screen, the palette, the footer and the
dialogs say where each now is, and a `keys:` the cockpit could not bind is a config error
naming its line."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from core.config.schema import load_config
from core.control.service import ControlPlane
from core.errors import ConfigError
from t25_tui.tui.app import T25App, make_app
from t25_tui.tui.commands import Keymap, bindable
from t25_tui.tui.screens.detail import TaskDetailScreen
from t25_tui.tui.screens.dialogs import ApprovalDialog
from t25_tui.tui.screens.help import HelpScreen
from t25_tui.tui.screens.panes import CostPane
from tests.support.cockpit import help_rows, settle_board, until
from tests.support.screen_text import screen_text

MOVED = """
keys:
  cost: f4
  inbox: ["5", f3]
  back: backspace
  close: ctrl+w
  approval.approve: "!"
  log.follow: p
"""


def with_keys(seeded, keys: str) -> T25App:
    """The seeded cockpit, its t25.yaml given `keys`, loaded as the command line loads it."""
    path = seeded.control.config.path
    path.write_text(path.read_text() + keys)
    config = load_config(path, commands=bindable)
    control = ControlPlane(config, seeded.control.store, seeded.control.bus)
    return make_app(control, clock=seeded.clock, actor="ana@ops")


async def test_a_moved_key_runs_its_command_and_the_old_one_does_not(seeded):
    app = with_keys(seeded, MOVED)
    async with app.run_test(size=(120, 36)) as pilot:
        await settle_board(app, pilot)
        await pilot.press("c", "f5")  # cost's old keys
        await pilot.pause()
        assert app.screen is app.screen_stack[0]
        await pilot.press("f4")
        await until(pilot, lambda: isinstance(app.screen, CostPane) and app.screen.ready)
        await pilot.press("escape")  # back's old key
        await pilot.pause()
        assert isinstance(app.screen, CostPane)
        await pilot.press("backspace")
        await until(pilot, lambda: app.screen is app.screen_stack[0])
        await pilot.press("5")  # a new key beside an old one kept
        await until(pilot, lambda: app.screen.__class__.__name__ == "Inbox")
        await pilot.press("backspace", "f3")
        await until(pilot, lambda: app.screen.__class__.__name__ == "Inbox")
        await pilot.press("backspace")
        await until(pilot, lambda: app.screen is app.screen_stack[0])

        # A screen's key and a dialog's move the same way.
        assert app.board.focus_task("T-3")
        await pilot.press("w")  # the log (l moves between lanes on the board)
        await until(pilot, lambda: isinstance(app.screen, TaskDetailScreen) and app.screen.ready)
        pane = app.screen.query_one("LogPane")
        await pilot.press("f")  # log.follow's old key
        await pilot.pause()
        assert pane.following
        await pilot.press("p")  # on the detail, its own key wins over the agents pane's
        await until(pilot, lambda: not pane.following)
        assert isinstance(app.screen, TaskDetailScreen)

        await pilot.press("backspace")
        await until(pilot, lambda: app.screen is app.screen_stack[0])
        assert app.board.focus_task("T-2")
        await pilot.press("a")
        await until(pilot, lambda: isinstance(app.screen, ApprovalDialog))
        await pilot.press("escape", "a")  # close's and approve's old keys
        await pilot.pause()
        assert isinstance(app.screen, ApprovalDialog)
        await pilot.press("ctrl+w")
        await until(pilot, lambda: app.screen is app.screen_stack[0])
        await pilot.press("a")
        await until(pilot, lambda: isinstance(app.screen, ApprovalDialog))
        await pilot.press("exclamation_mark")
        await until(pilot, lambda: app.screen is app.screen_stack[0])
        await app.finish_decisions()
    assert [e.decision for e in seeded.control.audit.entries(task="T-2")][-1] == "approve"


async def test_the_help_the_palette_the_footer_and_the_dialogs_show_the_keys_in_effect(seeded):
    app = with_keys(seeded, MOVED)
    async with app.run_test(size=(120, 120)) as pilot:
        await settle_board(app, pilot)
        await until(pilot, lambda: " 5 inbox " in screen_text(app).splitlines()[-1])  # the footer
        palette = {c.title: c.help for c in app.get_system_commands(app.screen)}
        assert palette["T25: Cost"].endswith("(F4)")
        assert palette["T25: Inbox"].endswith("(5 / F3)")

        await pilot.press("question_mark")
        await until(pilot, lambda: "cost" in help_rows(screen_text(app)))
        assert isinstance(app.screen, HelpScreen)
        rows = help_rows(screen_text(app))
        assert rows["cost"] == "F4" and rows["inbox"] == "5 / F3" and rows["back"] == "backspace"
        assert rows["approval.approve"] == "!" and rows["close"] == "ctrl+w"
        assert rows["audit"] == "u / F6"  # what `keys:` leaves alone keeps its defaults

        await pilot.press("escape")  # close moved: escape no longer closes the help
        await pilot.pause()
        assert isinstance(app.screen, HelpScreen)
        await pilot.press("q")
        await until(pilot, lambda: not isinstance(app.screen, HelpScreen))
        assert app.board.focus_task("T-2")
        await pilot.press("a")
        shown = "! approve · r reject (asks why) · tab moves · ctrl+w close"
        await until(pilot, lambda: shown in screen_text(app))
        assert isinstance(app.screen, ApprovalDialog)


# -- a keys: the cockpit cannot bind -------------------------------------------------------


IDS = "the cockpit's help screen (? in `t25 tui`) lists each command's id and keys"
FORM = "every key is documented, with its default, in t25.yaml.example"


@pytest.mark.parametrize(
    ("keys", "line", "problem", "hint"),
    [
        (
            'keys:\n  inbox: "5"\n  cots: f4\n',
            3,
            (
                "keys.cots: unknown command 'cots' (known: approval.approve, approval.reject, "
                "archive, audit, back, board, cancel, close,"
            ),
            IDS,
        ),
        ("keys:\n  cots: f4\n", 2, "; did you mean 'cost'?", IDS),
        (
            "keys:\n  cost: i\n",
            2,
            "keys.cost: 'i' already runs inbox on every screen; a key runs one command in a place",
            IDS,
        ),
        ("keys:\n  inbox: x\n  cost: [f4, x]\n", 2, "keys.inbox: 'x' already runs cost", IDS),
        ("keys:\n  log.follow: escape\n", 2, "'escape' already runs back on the task detail", IDS),
        (
            "keys:\n  cost: alt+x\n",
            2,
            (
                "keys.cost: expected a key that works over SSH: a lowercase letter, digit or "
                "punctuation mark, ctrl+letter, f1-f12, an arrow"
            ),
            FORM,
        ),
        ("keys:\n  cost: ctrl+i\n", 2, "keys.cost: ctrl+i is taken by the terminal", FORM),
        ("keys:\n  cost: C\n", 2, "keys.cost: a capital letter needs shift; write 'c'", FORM),
        ("keys:\n  cost: []\n", 2, "keys.cost: expected at least one key", FORM),
        ("keys:\n  cost: [f4, F4]\n", 2, "keys.cost: 'F4' is listed twice", FORM),
        ("keys:\n  cost: c,f4\n", 2, "keys.cost: write several keys as a list", FORM),
        ("keys: [cost]\n", 1, "keys: expected a mapping of keys, got a list", FORM),
    ],
)
def test_a_keys_entry_the_cockpit_cannot_bind_is_an_error_naming_its_line(
    t25, repo: Path, keys: str, line: int, problem: str, hint: str
):
    assert t25("init").code == 0
    config = repo / "t25.yaml"
    lines_before = config.read_text().count("\n")
    config.write_text(config.read_text() + keys)
    done = t25("task", "list")
    assert done.code != 0
    error, said = done.err.splitlines()[:2]
    assert error.startswith(f"t25: error: t25.yaml:{lines_before + line}: ")
    assert problem in error
    assert said == f"  hint: {hint}"


def test_keys_that_fit_load_as_the_names_the_cockpit_binds(tmp_path: Path):
    path = tmp_path / "t25.yaml"
    path.write_text(
        "projects:\n  - name: app\n"
        "keys:\n  cost: F4\n  filter: '?'\n  help: [question_mark, f1]\n  detail.history: 9\n"
    )
    with pytest.raises(
        ConfigError, match=r"t25.yaml:5: keys.filter: 'question_mark' already runs help"
    ):
        load_config(path, commands=bindable)
    path.write_text(
        "projects:\n  - name: app\n"
        "keys:\n  cost: F4\n  filter: '?'\n  help: [h, f1]\n  detail.history: 9\n"
    )
    config = load_config(path, commands=bindable)
    assert config.keys == {
        "cost": ["f4"],
        "filter": ["question_mark"],
        "help": ["h", "f1"],
        "detail.history": ["9"],
    }
    assert Keymap(config.keys).textual() == {
        "cost": "f4",
        "filter": "question_mark",
        "help": "h,f1",
        "detail.history": "9",
    }


def test_a_keymap_that_reached_the_cockpit_unchecked_is_refused_all_the_same():
    with pytest.raises(ConfigError, match=re.escape("keys.cots: unknown command 'cots'")):
        Keymap({"cots": ["f4"]})
