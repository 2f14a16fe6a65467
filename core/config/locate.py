"""Where T25's configuration lies: the nearest t25.yaml, never one inside a task's worktree.

The standard library alone, so what must answer at once (the shell completion's task ids)
can find the file without loading the schema."""

from __future__ import annotations

from pathlib import Path

from core.errors import ConfigError

CONFIG_FILENAME = "t25.yaml"
INIT_HINT = "run `t25 init` to create one"


def find_config(start: Path, explicit: Path | None = None) -> Path:
    """The t25.yaml to use: `explicit` if given, else the nearest one at or above `start`,
    looking no higher than the enclosing git repository's root. Never one inside a task's
    worktree (an agent may have committed it on the task branch): from in there, the search
    starts at the folder that holds the worktree, i.e. the operator's checkout."""
    if explicit is not None:
        explicit = Path(explicit).expanduser().absolute()
        if not explicit.is_file():
            raise ConfigError(
                f"{display_path(explicit)}: no such file",
                hint=f"check the --config path, or {INIT_HINT}",
            )
        if (tree := task_tree_of(explicit.parent)) is not None:
            raise ConfigError(
                f"{display_path(explicit)}: lies in task {tree.name}'s worktree, which holds what "
                "its agents wrote; T25 never reads its configuration from there",
                hint="point --config at the t25.yaml of your own checkout",
            )
        return explicit
    start = Path(start).expanduser().absolute()
    here = start if start.is_dir() else start.parent
    if (tree := task_tree_of(here)) is not None:  # a t25.yaml in there is an agent's
        here = tree.parent
    for directory in (here, *here.parents):
        candidate = directory / CONFIG_FILENAME
        if candidate.is_file():
            return candidate
        if (directory / ".git").exists():  # a file in a worktree, a directory otherwise
            break
    raise ConfigError(
        f"no {CONFIG_FILENAME} in {here} or above it (up to {directory})", hint=INIT_HINT
    )


def task_tree_of(directory: Path) -> Path | None:
    """The T25 task worktree `directory` lies in, if any: a linked worktree (`.git` is a
    file) with T25's ownership record beside it (`<root>/.meta/<id>.json`)."""
    for folder in (directory, *directory.parents):
        if (folder / ".git").is_file() and (
            folder.parent / ".meta" / f"{folder.name}.json"
        ).is_file():
            return folder
    return None


def display_path(path: Path) -> str:
    """The path as messages show it: relative to the working directory when beneath it."""
    try:
        return str(path.relative_to(Path.cwd()))
    except ValueError:
        return str(path)
