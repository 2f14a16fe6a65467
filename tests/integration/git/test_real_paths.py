"""`real_path` answers as `os.path.realpath` does, on a real file system: by the kernel where
the path exists, by `os.path.realpath` where it does not."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from core.workspace import real_paths
from core.workspace.real_paths import real_path, resolved


@pytest.fixture
def tree(tmp_path: Path) -> Path:
    """Folders, files and links of every kind a path may lead through."""
    (tmp_path / "a" / "b").mkdir(parents=True)
    (tmp_path / "a" / "b" / "file").write_text("x")
    (tmp_path / "to-b").symlink_to(tmp_path / "a" / "b")  # absolute
    (tmp_path / "a" / "up").symlink_to("..")  # relative, upwards
    (tmp_path / "chain").symlink_to("to-b")  # a link to a link
    (tmp_path / "dangling").symlink_to("nowhere")
    (tmp_path / "loop1").symlink_to("loop2")
    (tmp_path / "loop2").symlink_to("loop1")
    os.mkfifo(tmp_path / "fifo")
    return tmp_path


NAMES = [
    "a",
    "a/b/file",
    "to-b",
    "to-b/file",
    "to-b/../b",  # `..` after a link: taken from where the link leads
    "a/up/a/up/to-b",
    "chain/file",
    "a/./b//file",
    "dangling",  # does not exist: as os.path.realpath
    "to-b/not-there/deeper",
    "loop1",
    "fifo",  # opened for no I/O: does not block
]


@pytest.mark.parametrize("name", NAMES)
def test_real_path_is_os_realpath(tree: Path, name: str) -> None:
    assert real_path(tree / name) == os.path.realpath(tree / name)
    assert resolved(tree / name) == Path(os.path.realpath(tree / name))
    if name != "loop1":  # where `Path.resolve` raises RuntimeError instead
        assert resolved(tree / name) == (tree / name).resolve()


def test_a_relative_path_is_taken_from_the_working_directory(
    tree: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(tree / "a")
    assert real_path("up/chain") == os.path.realpath("up/chain") == str(tree / "a" / "b")


def test_an_existing_path_is_resolved_by_the_kernel_not_walked(
    tree: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    walked: list[object] = []
    monkeypatch.setattr(real_paths.os.path, "realpath", lambda p: walked.append(p) or "walked")
    assert real_path(tree / "chain" / "file") == str(tree / "a" / "b" / "file")
    assert real_path(tree / "dangling") == "walked"
    assert walked == [tree / "dangling"]
