"""The checkout's environments are found by a walk that is kept while no folder it read has
changed (adapters.checkout_view): never stale, whatever is made or removed, and read again
when a folder had changed too recently to trust."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from adapters import checkout_view
from core.workspace import settled_files
from core.workspace.settled_files import settled_state
from tests.support.waiting import wait_until


@pytest.fixture
def checkout(tmp_path: Path) -> Path:
    checkout_view._walks.clear()
    root = tmp_path / "checkout"
    for folder in ("src/calc", "docs", ".venv", "web/node_modules"):
        (root / folder).mkdir(parents=True)
    (root / ".venv" / "pyvenv.cfg").write_text("home = /usr/bin\n")
    return root


@pytest.fixture
def walks(monkeypatch: pytest.MonkeyPatch) -> list[str]:
    """The folders read by a walk (os.scandir)."""
    read: list[str] = []
    real = os.scandir

    def counted(path):
        read.append(str(path))
        return real(path)

    monkeypatch.setattr(os, "scandir", counted)
    return read


def settle(*folders: Path) -> None:
    wait_until(lambda: settled_state(list(folders)) is not None, timeout=10)


def found(checkout: Path, tree: Path) -> list[str]:
    return [p.relative_to(checkout).as_posix() for p in checkout_view.environments(checkout, tree)]


def every_folder(root: Path) -> list[Path]:
    return [root, *(Path(d) for d, _, _ in os.walk(root) if Path(d) != root)]


def test_an_unchanged_checkout_is_walked_once(checkout, tmp_path, walks):
    settle(*every_folder(checkout))
    tree = tmp_path / "tree"
    tree.mkdir()

    assert found(checkout, tree) == [".venv", "web/node_modules"]
    first = len(walks)
    assert found(checkout, tree) == [".venv", "web/node_modules"]
    assert first > 0 and len(walks) == first


def test_an_environment_made_or_unmade_after_the_walk_is_seen(checkout, tmp_path, walks):
    settle(*every_folder(checkout))
    tree = tmp_path / "tree"
    tree.mkdir()
    found(checkout, tree)

    (checkout / "src" / "env").mkdir()
    (checkout / "src" / "env" / "pyvenv.cfg").write_text("home = /usr/bin\n")
    assert found(checkout, tree) == [".venv", "src/env", "web/node_modules"]

    settle(*every_folder(checkout))
    (checkout / ".venv" / "pyvenv.cfg").unlink()  # the folder stays: no longer an environment
    assert found(checkout, tree) == ["src/env", "web/node_modules"]


def test_a_folder_changed_while_it_was_walked_is_walked_again(checkout, tmp_path, walks):
    settle(*every_folder(checkout))
    tree = tmp_path / "tree"
    tree.mkdir()
    real = os.scandir

    def making(path):  # an environment made in `docs` just after the walk listed it
        listed = list(real(path))
        if Path(path) == checkout / "docs" and not (checkout / "docs" / "env").exists():
            (checkout / "docs" / "env").mkdir()
            (checkout / "docs" / "env" / "pyvenv.cfg").write_text("home = /usr/bin\n")
        return listed

    os.scandir = making  # restored by `walks`' monkeypatch
    assert "docs/env" not in found(checkout, tree)  # not there yet when `docs` was listed
    assert "docs/env" in found(checkout, tree)


def test_a_walk_that_read_a_folder_too_recently_changed_is_not_kept(
    checkout, tmp_path, walks, monkeypatch
):
    monkeypatch.setattr(settled_files, "SETTLED_FINE_NS", 10**15)  # every change is recent
    monkeypatch.setattr(settled_files, "SETTLED_NS", 10**15)
    tree = tmp_path / "tree"
    tree.mkdir()

    found(checkout, tree)
    first = len(walks)
    found(checkout, tree)
    assert len(walks) == 2 * first
