"""The contributor's documents keep up with the tree: every room is in the documentation's
Layout page and in ARCHITECTURE.md, the pre-commit hooks are the gate with the pinned tools, and the
changelog has the version pyproject.toml says."""

from __future__ import annotations

import tomllib

import yaml

from tests.support import CHECKOUT

ROOT = CHECKOUT
LAYOUT = (ROOT / "docs" / "architecture" / "layout.md").read_text()
ARCHITECTURE = (ROOT / "ARCHITECTURE.md").read_text()


def rooms() -> list[str]:
    """Every room of the tree: the packages inside core/ and t25_tui/, and the others."""
    inner = [
        f"{package}/{room.name}/"
        for package in ("core", "t25_tui")
        for room in sorted((ROOT / package).iterdir())
        if (room / "__init__.py").is_file()
    ]
    return [*inner, "store/", "adapters/", "t25_tui/runtime.py"]


def test_every_room_is_in_the_layout_page_and_in_the_architecture():
    assert len(rooms()) >= 12
    for room in rooms():
        assert f"| `{room}` |" in LAYOUT, room
        assert f"| `{room}` |" in ARCHITECTURE, room


def test_the_layout_links_the_architecture_and_contributing():
    assert "(../../ARCHITECTURE.md)" in LAYOUT and "(../../CONTRIBUTING.md)" in LAYOUT


def test_pre_commit_runs_the_gate_with_the_pinned_tools():
    config = yaml.safe_load((ROOT / ".pre-commit-config.yaml").read_text())
    hooks = [hook for repo in config["repos"] for hook in repo["hooks"]]
    assert {repo["repo"] for repo in config["repos"]} == {"local"}
    assert {hook["language"] for hook in hooks} == {"system"}
    tools = [hook["entry"].split()[:3] for hook in hooks]
    assert tools == [
        [".venv/bin/ruff", "check", "--force-exclude"],
        [".venv/bin/ruff", "format", "--check"],
        [".venv/bin/mypy"],
        [".venv/bin/lint-imports"],
    ]
    contributing = (ROOT / "CONTRIBUTING.md").read_text()
    for tool in tools:
        assert " ".join(tool[:2]).removesuffix(" --force-exclude") in contributing


def test_the_changelog_has_an_unreleased_section_and_the_current_version():
    version = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["version"]
    changelog = (ROOT / "CHANGELOG.md").read_text()
    assert "\n## Unreleased\n" in changelog
    assert f"\n## {version} - " in changelog


def test_the_error_tree_drawn_in_core_errors_is_every_error_and_its_parent():
    """Each class of `core/errors.py` is in the tree its docstring draws, under its parent."""
    import inspect
    import re

    from core import errors

    drawn: dict[str, str] = {}
    parents: list[str] = []
    for line in (errors.__doc__ or "").splitlines():
        found = re.match(r"^    ((?:[│ ] {3})*)(?:[├└]── )?(\w+)\s", line)
        if found is None or not found[2][0].isupper():
            continue
        depth = len(found[1]) // 4 + (1 if "──" in line else 0)
        parents[depth:] = [found[2]]
        drawn[found[2]] = parents[depth - 1] if depth else ""
    classes = {
        name: cls.__base__.__name__ if cls is not errors.T25Error else ""
        for name, cls in inspect.getmembers(errors, inspect.isclass)
        if issubclass(cls, errors.T25Error) and cls.__module__ == errors.__name__
    }
    assert drawn == classes
