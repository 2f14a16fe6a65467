"""The task's tree seen where the project's tooling expects it: at the main checkout's path.

A project developed the usual way keeps a virtual environment in its checkout with itself
installed editable (`pip install -e .`): the `.pth` file that install writes names the
checkout's `src/`, the environment's scripts name its interpreter by absolute path, and tool
configurations name paths under the checkout. A check run in the task's worktree would
import the *main checkout's* code, not the change's. So inside the sandbox a run given a
view sees the task's tree at the checkout's own path:

- the tree is bound over the checkout's path (writable when the run may write the tree);
- the checkout's environments that the tree lacks are given back read-only at their own
  paths: virtual environments (a folder holding `pyvenv.cfg`), `node_modules` and
  `*.egg-info`, at most `DEPTH` levels down - so the interpreter, its `.pth` files and its
  scripts resolve to the code under test;
- git's own files: the tree's `.git` file names its git dir inside the checkout's `.git`,
  which the tree now covers. The repository's shared `.git` is bound read-only at
  `GIT_INSIDE`, and a `.git` file naming the tree's git dir there is bound over the tree's
  own, so `git status`, `git log` and `git diff` inside see the task's branch.

The environments' mount points are made as empty folders in the tree before the run
(`make_mount_points`: bubblewrap cannot make them in a tree bound read-only); `tidy` removes
them after it. T25's state (`.factory/`) stays out of sight: the checkout's
path shows the tree alone.
"""

from __future__ import annotations

import contextlib
import os
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from pathlib import Path

from core.workspace.real_paths import resolved
from core.workspace.settled_files import State, settled_state

GIT_INSIDE = "/run/t25-git"  # the repository's shared .git, inside (a fresh /run)
DEPTH = 2  # how far below the checkout's root an environment is looked for
ENVIRONMENT_NAMES = frozenset({"node_modules"})
ENVIRONMENT_SUFFIXES = (".egg-info",)
# Never looked into: git's own folder and the usual homes of heavy generated trees.
NOT_LOOKED_INTO = frozenset({".git", ".factory", ".hg", ".svn", "node_modules", "__pycache__"})


@dataclass(frozen=True)
class CheckoutView:
    """How one run sees its tree at the checkout's path: what `mounts` binds there."""

    checkout: Path  # the main checkout: where the tree is seen
    git_dir: Path  # the repository's shared .git, bound read-only at GIT_INSIDE
    git_file: Path  # the `.git` file seen at the checkout's root (written by `checkout_view`)
    environments: tuple[Path, ...] = ()  # the checkout's, given back read-only

    def mounts(self, tree: Path, *, writable: bool) -> list[str]:
        """bwrap's arguments for the view; they go last, over every other mount."""
        out = ["--ro-bind", str(self.git_dir), GIT_INSIDE]
        out += ["--bind" if writable else "--ro-bind", str(tree), str(self.checkout)]
        out += ["--ro-bind", str(self.git_file), str(self.checkout / ".git")]
        for place in self.environments:
            out += ["--ro-bind", str(place), str(place)]
        return out

    def mount_points(self, tree: Path) -> list[Path]:
        """Where in the tree the environments' mount points are made, deepest first."""
        return sorted(
            (tree / place.relative_to(self.checkout) for place in self.environments),
            key=lambda p: len(p.parts),
            reverse=True,
        )


def checkout_view(tree: Path, scratch: Path, hidden: Iterable[Path] = ()) -> CheckoutView | None:
    """The view for `tree` - a linked worktree of a repository with a main checkout - its
    `.git` file written into `scratch` (a folder of the run's own, out of the run's sight);
    None for a tree that is not such a worktree (a bare repository's, a plain folder)."""
    common = git_common_dir(tree)
    if common is None or common.name != ".git" or not common.is_dir():
        return None
    checkout = common.parent
    if checkout == tree:
        return None
    try:
        line = (tree / ".git").read_text(encoding="utf-8").strip()
        own = resolved(tree / line.removeprefix("gitdir:").strip()).relative_to(common)
    except (OSError, ValueError):  # its git dir is not inside the shared one
        return None
    git_file = scratch / "dot-git"
    git_file.write_text(f"gitdir: {GIT_INSIDE}/{own.as_posix()}\n", encoding="utf-8")
    kept_out = tuple(Path(os.path.realpath(p)) for p in hidden)
    return CheckoutView(
        checkout=checkout,
        git_dir=common,
        git_file=git_file,
        environments=tuple(environments(checkout, tree, kept_out)),
    )


def unseen(tree: Path, sandbox: str) -> str | None:
    """Why a run in `tree` may not test the change although it passed, when the tree could
    not be seen at its checkout's path and the checkout holds environments that resolve to
    the checkout's own code; None when that does not matter."""
    common = git_common_dir(tree)
    if common is None or common.name != ".git":
        return None
    checkout = common.parent
    found = [p.relative_to(checkout).as_posix() for p in environments(checkout, tree)]
    if not found:
        return None
    return (
        f"the check ran at the tree's own path, not at {checkout} (sandbox {sandbox} cannot "
        f"show it there): code {', '.join(found[:3])} installs from the checkout is the "
        "checkout's, not the change's"
    )


def environments(checkout: Path, tree: Path, kept_out: tuple[Path, ...] = ()) -> Iterator[Path]:
    """The checkout's environments the tree lacks, at most DEPTH levels down, in order: a
    link is never followed, nothing under `kept_out` (T25's state) is given."""
    for place in _checkout_environments(checkout):
        if any(place.is_relative_to(p) for p in kept_out):
            continue
        if not os.path.lexists(tree / place.relative_to(checkout)):
            yield place


# The last walk of each checkout whose folders had all settled: the folders it read, their
# states taken before each was read, and the environments it found.
_walks: dict[Path, tuple[list[Path], State, tuple[Path, ...]]] = {}
_WALKS_KEPT = 16


def _checkout_environments(checkout: Path) -> tuple[Path, ...]:
    """The environments below the checkout, walked again only when a folder the last walk
    read has changed since (core.workspace.settled_files): a folder's times change with
    every name made, removed or renamed in it. Before every run, a checkout of 500 folders
    took 12.8 ms to walk; it takes 1 ms to stat."""
    kept = _walks.pop(checkout, None)
    if kept is not None and settled_state(kept[0]) == kept[1]:
        _walks[checkout] = kept
        return kept[2]
    read: list[tuple[Path, State | None]] = []
    found = tuple(_environments_below(checkout, DEPTH, read))
    states = [state for _, state in read]
    if None not in states:  # a folder changed too recently is not trusted: walked again
        whole = tuple(s for state in states if state for s in state)
        _walks[checkout] = ([path for path, _ in read], whole, found)
        while len(_walks) > _WALKS_KEPT:
            del _walks[next(iter(_walks))]
    return found


def _environments_below(
    folder: Path, depth: int, read: list[tuple[Path, State | None]]
) -> Iterator[Path]:
    """The environments among the real folders below `folder`, `depth` levels down at
    most, sorted; an environment, and a folder never looked into, is not looked into. Each
    folder is one stat (its `pyvenv.cfg`). Every folder read or looked into is added to
    `read` with its state just before."""
    if depth <= 0:
        return
    if not read:
        read.append((folder, settled_state([folder])))
    try:
        entries = sorted(os.scandir(folder), key=lambda e: e.name)
    except OSError:
        return
    for entry in entries:
        if not entry.is_dir(follow_symlinks=False):
            continue
        place = Path(entry.path)
        read.append((place, settled_state([place])))
        if _is_environment(entry.name, entry.path):
            yield place
        elif entry.name not in NOT_LOOKED_INTO:
            yield from _environments_below(place, depth - 1, read)


def _is_environment(name: str, path: str) -> bool:
    return (
        name in ENVIRONMENT_NAMES
        or name.endswith(ENVIRONMENT_SUFFIXES)
        or os.path.isfile(os.path.join(path, "pyvenv.cfg"))
    )


def make_mount_points(view: CheckoutView, tree: Path) -> None:
    """Make the environments' mount points in the tree before the run: bubblewrap cannot
    make them in a tree bound read-only (a role that may change no file)."""
    for point in view.mount_points(tree):
        with contextlib.suppress(OSError):  # a file there: bubblewrap then says why
            point.mkdir(parents=True, exist_ok=True)


def tidy(view: CheckoutView, tree: Path) -> None:
    """Remove the empty folders bubblewrap made in the tree as the environments' mount
    points, and the empty folders it made above them; never anything with content."""
    for point in view.mount_points(tree):
        here = point
        while here != tree and here.is_relative_to(tree):
            try:
                here.rmdir()
            except OSError:  # not empty, not there, or a file: left as it is
                break
            here = here.parent


def git_common_dir(worktree: Path) -> Path | None:
    """The repository's shared `.git` a linked worktree belongs to, read from its `.git`
    file and the `commondir` beside it; None for anything else."""
    try:
        line = (worktree / ".git").read_text(encoding="utf-8").strip()
    except OSError:  # absent, or a directory: a main checkout
        return None
    if not line.startswith("gitdir:"):
        return None
    own = resolved(worktree / line.removeprefix("gitdir:").strip())
    try:
        common = (own / "commondir").read_text(encoding="utf-8").strip()
    except OSError:
        return own
    return resolved(own / common)
