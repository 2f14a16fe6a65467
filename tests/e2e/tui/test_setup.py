"""`t25 tui` where nothing is set up: no t25.yaml, or no agent CLI on PATH."""

from __future__ import annotations

import subprocess
import sys
import time

from core.config.schema import load_config
from t25_tui.tui.readiness import missing_agents
from t25_tui.tui.sample_data import make_sample_repo
from tests.support import CHECKOUT
from tests.support.terminal import T25, Terminal


def test_without_a_config_it_says_how_to_create_one(tmp_path):
    make_sample_repo(tmp_path)
    done = subprocess.run(
        [str(T25), "tui"],
        cwd=tmp_path,
        capture_output=True,
        text=True,
        stdin=subprocess.DEVNULL,
        timeout=60,
    )
    assert done.returncode == 1
    assert "t25 init" in done.stderr


def test_without_a_config_it_offers_to_create_one_in_a_terminal(tmp_path):
    make_sample_repo(tmp_path)
    term = Terminal(tmp_path, "--no-workers")
    try:
        term.wait_for("Create t25.yaml")
        term.type("y\r")
        end = time.monotonic() + 30
        while not (tmp_path / "t25.yaml").exists():
            assert time.monotonic() < end
            term.read()
        term.wait_for("No agent CLI can play")  # the example config names claude
        term.type("\r")
        term.wait_for("q quit")  # the board's footer: the note is closed, the board has the keys
        term.type("q")
        assert term.wait_exit() == 0
    finally:
        term.kill()


def test_no_agent_found_names_the_binaries_and_how_to_configure(tmp_path, monkeypatch):
    from adapters.registry import builtin_adapters

    monkeypatch.setenv("PATH", str(tmp_path))  # no agent CLI on it
    (tmp_path / "t25.yaml").write_text(
        "projects: [{name: shop, repo: .}]\nroles:\n  dev: [{adapter: claude}, {adapter: nosuch}]\n"
    )
    note = missing_agents(load_config(tmp_path / "t25.yaml"), dict(builtin_adapters()))
    assert note is not None
    lines = note.splitlines()
    assert "  claude (adapter claude)  — for spec, planner, dev, qa, reviewer, docs" in lines
    assert "  adapter 'nosuch': T25 has no such adapter  — for dev" in lines
    assert f"on PATH={tmp_path}" in lines and "  roles:" in lines


def test_help_does_not_import_textual():
    code = (
        "import sys; from t25_tui.cli.parser import build_parser; build_parser(); "
        "print('textual' in sys.modules)"
    )
    out = subprocess.run(
        [sys.executable, "-c", code],
        capture_output=True,
        text=True,
        cwd=CHECKOUT,
        check=True,
    )
    assert out.stdout.strip() == "False"
