"""The reference pages in docs/reference/ are the code's: each one, rendered again from the
parser, the cockpit's command table, the OpenAPI document, the error table and the
configuration schema, is the page committed; a stale page names the command that writes it."""

from __future__ import annotations

import importlib.util
from types import ModuleType

from tests.support import CHECKOUT

ROOT = CHECKOUT


def generator() -> ModuleType:
    spec = importlib.util.spec_from_file_location(
        "gen_reference", ROOT / "docs" / "gen_reference.py"
    )
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_every_reference_page_is_the_one_the_code_gives():
    gen = generator()
    for name, text in gen.render().items():
        page = ROOT / "docs" / "reference" / name
        committed = page.read_text() if page.is_file() else None
        assert committed == text, f"docs/reference/{name} is stale: run {gen.COMMAND}"


def test_the_reference_holds_the_generated_pages_and_its_index_only():
    pages = {page.name for page in (ROOT / "docs" / "reference").glob("*.md")}
    assert pages == {*generator().PAGES, "index.md"}


def test_a_stale_page_is_found(tmp_path, monkeypatch):
    """The check above can fail: a page that says what the code no longer does differs."""
    gen = generator()
    monkeypatch.setattr("t25_tui.tui.commands.COMMANDS", ())
    assert gen.render()["keys.md"] != (ROOT / "docs" / "reference" / "keys.md").read_text()
