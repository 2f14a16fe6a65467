"""A fingerprint of the main checkout, taken before and after every run that is not known to
be confined (core.worker.outside_changes.confined_ahead).

The invariant is that no agent ever writes the main checkout; only a human merge does.
An agent runs in its own worktree, but nothing in the operating system stops it (or the
code it wrote, which QA checks run) from writing elsewhere, and a linked worktree can
legitimately write the repository's shared `.git/config` and `.git/hooks`, which then act
in every checkout, the main one included. So T25 does not trust: it measures. Anything a
run changed here fails the run, with a list of what changed that a person can read, and
`core.workspace.watch` undoes what it can.

What is measured, and why - at the cost of what changed, not of the tree's size:

* HEAD (its symbolic ref and commit): a commit, reset or checkout in the main checkout.
* Every ref (branches, tags, `refs/replace`, notes) but T25's task branches and the
  remote-tracking refs a fetch moves: a planted replace ref or tag changes what the
  operator's git shows.
* `git status` (untracked files one by one, ignored ones never) and, for each path it
  lists, its lstat (size, mtime, ctime, mode): a new, changed or removed file, and a file
  already changed that changes again. git's index and untracked cache make this cost what
  changed: no directory is walked by T25, ignored ones (a `node_modules`) not at all.
* The index where it differs from HEAD (from the same `git status`) and the
  assume-unchanged / skip-worktree flags (`git ls-files -v`, read again only when the index
  file changed): staging, or hiding a change from `git status`, which changes no file.
* The files git reads settings and programs from, by content and mode, so that they can
  be put back: `.git/config`, `config.worktree` (the main checkout's and the task
  worktree's), every file under `.git/hooks` and `.git/info`, and the operator's global
  config (`~/.gitconfig`, `$XDG_CONFIG_HOME/git/config`). These are how a worktree plants
  programs that run in the main checkout (a hook, a filter, `core.hooksPath`,
  `core.fsmonitor`, `core.attributesFile`).
* T25's own merges (`refs/t25/landed/<id>`): HEAD moved along them is T25's doing.

Two git processes in all, most of the time: one `git status --porcelain=v2 --branch`
(HEAD, the listed paths, what is staged) and one `git for-each-ref`.

Excluded: `.factory/` (T25's own store, audit log and worktrees) and the worktree root,
which agents are meant to write, and the task branches of other tasks (`feat/T-2`), which
their own runs move while this one goes on; the running task's own branch is measured.
"""

from __future__ import annotations

import asyncio
import os
import re
import stat
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from pathlib import Path

from core.domain.models import TaskType
from core.workspace.git import config_entries, git_bytes
from core.workspace.index_flags import flagged_entries, git_dirs
from core.workspace.status_v2 import read_status

FACTORY_DIR = ".factory"
# Whole directories of the repository whose files can run or redirect code.
_COMMON_DIRS = ("hooks", "info")
# Files read as git config, by name: their change is described key by key.
_CONFIG_NAMES = frozenset({"config", "config.worktree", ".gitconfig"})
# T25's own refs, written between runs by T25 alone and never read as config, so not
# measured (another task's run may be going on): what a lost attempt left
# (`History.set_aside`), what a worktree held before it was reset or removed
# (`History.snapshot`), what a branch held before it was moved back (`History.rewind`).
T25_REFS = "refs/t25"
LEFTOVERS_REF = f"{T25_REFS}/leftovers"
SNAPSHOTS_REF = f"{T25_REFS}/snapshots"
ARCHIVE_REF = f"{T25_REFS}/archive"
LANDED_REF = f"{T25_REFS}/landed"  # the merge commits T25 landed, one per task
REMOTE_REFS = "refs/remotes/"  # what a fetch moves: the operator's, never counted
# T25's task branches (`feat/T-7`), local and remote-tracking.
TASK_BRANCH = re.compile(
    rf"refs/(?:heads|remotes/[^/]+)/(?:{'|'.join(t.value for t in TaskType)})/T-[0-9]+"
)

Stat = tuple[int, int, int, int]  # size, mtime_ns, ctime_ns, mode (0s for a directory)


@dataclass(frozen=True)
class GitFile:
    """One file git reads settings or programs from, as it was: enough to put it back."""

    path: Path
    mode: int
    body: bytes  # the content, or a symlink's target

    @property
    def is_link(self) -> bool:
        return stat.S_ISLNK(self.mode)


@dataclass(frozen=True)
class Fingerprint:
    """What the main checkout looked like at one moment; compare two with `changed`."""

    head_ref: str | None  # "refs/heads/trunk", None when detached or unborn
    head_sha: str | None  # None on an unborn branch
    status: Mapping[str, str]  # path -> porcelain v1 XY code ("??", "!!", " M", …)
    index: Mapping[str, str]  # path -> "tag mode blob stage" (tag: H, h, S, …)
    files: Mapping[str, Stat]  # path -> lstat summary
    git_files: Mapping[str, GitFile]  # ".git/config", ".git/hooks/pre-commit", "~/.gitconfig"
    refs: Mapping[str, str] = field(default_factory=dict)  # refname -> object id
    # T25's landed merges: merge commit -> its first parent (the default branch before it).
    landed: Mapping[str, str] = field(default_factory=dict)


async def fingerprint(
    repo: Path,
    *,
    exclude: Iterable[Path] = (),
    branch: str | None = None,
    worktree_git_dir: Path | None = None,
) -> Fingerprint:
    """Fingerprint the main checkout at `repo`, skipping `.factory/` and `exclude`
    (pass the worktree root when it is configured somewhere else inside the repository).

    `branch` is the task branch of the run being watched, measured among the refs; the
    config of its worktree, in `worktree_git_dir`, is measured with the shared files."""
    repo = repo.resolve()
    skip = _skipped(repo, exclude)
    # Only `status` can run a repository's filters (to compare content); the reads of the
    # refs and the index flags run nothing, so they skip the driver lookup.
    raw_status, raw_refs, (git_dir, common) = await asyncio.gather(
        # --ignore-submodules=all: a submodule's status would be computed by a child git
        # reading the submodule's own config. The untracked cache spares the directories
        # that did not change; ignored files are never listed, never walked.
        git_bytes(
            "-c",
            "core.untrackedCache=true",
            "status",
            "--porcelain=v2",
            "-z",
            "--branch",
            "--ignored=no",
            "--untracked-files=all",
            "--ignore-submodules=all",
            "--no-renames",
            cwd=repo,
        ),
        git_bytes(
            "for-each-ref",
            "--format=%(refname)%00%(objectname)%00%(parent)",
            cwd=repo,
            drivers_from=(),
        ),
        git_dirs(repo),
    )
    seen = read_status(raw_status)
    status = {p: xy for p, xy in seen.status.items() if not _under(p, skip)}
    flags = await flagged_entries(repo, git_dir / "index")
    files, git_files = await asyncio.to_thread(
        _scan, repo, list(status), _git_file_paths(git_dir, common, worktree_git_dir)
    )
    return Fingerprint(
        head_ref=seen.head_ref,
        head_sha=seen.head_sha,
        status=status,
        index={**seen.staged, **flags},
        files=files,
        git_files=git_files,
        refs=_refs(raw_refs, branch),
        landed=_landed(raw_refs),
    )


def changed(before: Fingerprint, after: Fingerprint, *, may_move: Iterable[str] = ()) -> list[str]:
    """What differs, one human-readable line per change; [] when nothing does. `may_move`
    names refs the run may move (an implementing agent commits on its own branch). HEAD
    moved along T25's own landed merges is not a change."""
    out: list[str] = []
    head_moved = (before.head_ref, before.head_sha) != (after.head_ref, after.head_sha)
    if head_moved and not _landed_by_t25(before, after):
        out.append(f"HEAD moved from {_head(before)} to {_head(after)}")
    out += git_changes(before, after, may_move=may_move)
    reported: set[str] = set()
    for path in sorted(before.status.keys() | after.status.keys()):
        old, new = before.status.get(path), after.status.get(path)
        line = _status_change(path, old, new, before.files.get(path), after.files.get(path))
        if line:
            out.append(line)
            reported.add(path)
    for path in sorted(before.index.keys() | after.index.keys()):
        old_entry, new_entry = before.index.get(path), after.index.get(path)
        if old_entry != new_entry and path not in reported:
            out.append(_index_change(path, old_entry, new_entry))
    return out


def _landed_by_t25(before: Fingerprint, after: Fingerprint) -> bool:
    """Whether HEAD went, on its branch, from where it was along T25's landed merges only
    (each landed on the one before it, by fast-forward)."""
    if before.head_ref != after.head_ref or after.head_sha is None:
        return False
    at, steps = after.head_sha, 0
    while at != before.head_sha and at in after.landed and steps < len(after.landed):
        at, steps = after.landed[at], steps + 1
    return at == before.head_sha


def git_changes(
    before: Fingerprint, after: Fingerprint, *, may_move: Iterable[str] = ()
) -> list[str]:
    """The part of `changed` about git's own files and refs: the config, hooks and `info/`
    files changed, and the refs created, moved or deleted (but HEAD's: "HEAD moved")."""
    out = _git_file_changes(before, after)
    allowed = {*may_move, before.head_ref, after.head_ref}
    for name in sorted(before.refs.keys() | after.refs.keys()):
        old, new = before.refs.get(name), after.refs.get(name)
        if old == new or name in allowed or name.startswith(REMOTE_REFS):
            continue
        if old is None:
            out.append(f"ref {name} created at {new and new[:12]}")
        elif new is None:
            out.append(f"ref {name} deleted (was {old[:12]})")
        else:
            out.append(f"ref {name} moved from {old[:12]} to {new[:12]}")
    return out


# -- measuring -----------------------------------------------------------------------------


def _skipped(repo: Path, exclude: Iterable[Path]) -> tuple[str, ...]:
    """Repository-relative prefixes not to measure: .factory/ and any excluded dir inside."""
    skip = [FACTORY_DIR]
    for path in exclude:
        try:
            skip.append(path.resolve().relative_to(repo).as_posix())
        except ValueError:
            pass  # outside the repository: never walked anyway
    return tuple(s for s in skip if s not in ("", "."))


def _under(rel: str, skip: tuple[str, ...]) -> bool:
    rel = rel.rstrip("/")
    return any(rel == s or rel.startswith(s + "/") for s in skip)


def _git_file_paths(
    git_dir: Path, common: Path, worktree_git_dir: Path | None
) -> tuple[list[tuple[str, Path]], list[tuple[str, Path]]]:
    """(label, path) of the single files and of the directories to hash whole."""
    home = Path(os.environ.get("HOME") or Path.home())
    xdg = Path(os.environ.get("XDG_CONFIG_HOME") or home / ".config")
    singles = [
        (".git/config", common / "config"),
        (".git/config.worktree", git_dir / "config.worktree"),
        (_shown_path(home / ".gitconfig", home), home / ".gitconfig"),
        (_shown_path(xdg / "git" / "config", home), xdg / "git" / "config"),
    ]
    if worktree_git_dir is not None:
        name = worktree_git_dir.name
        singles.append(
            (f".git/worktrees/{name}/config.worktree", worktree_git_dir / "config.worktree")
        )
    return singles, [(f".git/{d}", common / d) for d in _COMMON_DIRS]


def _shown_path(path: Path, home: Path) -> str:
    return f"~/{path.relative_to(home).as_posix()}" if path.is_relative_to(home) else str(path)


def _scan(
    repo: Path,
    listed: list[str],
    git_paths: tuple[list[tuple[str, Path]], list[tuple[str, Path]]],
) -> tuple[dict[str, Stat], dict[str, GitFile]]:
    """The lstat of each path `git status` lists, and the files git reads settings and
    programs from."""
    singles, dirs = git_paths
    git_files: dict[str, GitFile] = {}
    for label, path in singles:
        _read_into(git_files, label, path)
    for label, top in dirs:
        _read_tree_into(git_files, label, top)
    files: dict[str, Stat] = {}
    for rel in listed:
        try:
            st = os.lstat(repo / rel)
        except (FileNotFoundError, NotADirectoryError):
            continue  # a deleted file: its status says so
        files[rel] = (st.st_size, st.st_mtime_ns, st.st_ctime_ns, st.st_mode)
    return files, git_files


def _read_tree_into(into: dict[str, GitFile], label: str, top: Path) -> None:
    """Every file under `top` (the directory itself when it is a link: where it leads)."""
    if top.is_symlink():
        _read_into(into, label, top)
    for dirpath, dirnames, filenames in os.walk(top):
        for name in dirnames + filenames:
            path = Path(dirpath) / name
            if not path.is_dir() or path.is_symlink():
                _read_into(into, f"{label}/{path.relative_to(top).as_posix()}", path)


def _read_into(into: dict[str, GitFile], label: str, path: Path) -> None:
    """Record mode and content (or a symlink's target): `chmod +x` on a hook matters."""
    try:
        st = path.lstat()
        body = os.readlink(path).encode() if stat.S_ISLNK(st.st_mode) else path.read_bytes()
    except (FileNotFoundError, NotADirectoryError, IsADirectoryError):
        return
    into[label] = GitFile(path=path, mode=st.st_mode, body=body)


def _landed(raw: bytes) -> dict[str, str]:
    """T25's landed merges: the commit, and its first parent."""
    out: dict[str, str] = {}
    for line in os.fsdecode(raw).splitlines():
        name, _, rest = line.partition("\0")
        sha, _, parents = rest.partition("\0")
        if name.startswith(f"{LANDED_REF}/") and parents:
            out[sha] = parents.split()[0]
    return out


def _refs(raw: bytes, branch: str | None) -> dict[str, str]:
    """Every ref but the task branches of other tasks (`branch` is this run's own)."""
    own = f"refs/heads/{branch}" if branch else None
    out: dict[str, str] = {}
    for line in os.fsdecode(raw).splitlines():
        name, _, rest = line.partition("\0")
        sha = rest.partition("\0")[0]
        if name.startswith(REMOTE_REFS) and name != own:
            continue  # a fetch's, never a run's to answer for
        if name == own or not (TASK_BRANCH.fullmatch(name) or name.startswith(f"{T25_REFS}/")):
            out[name] = sha
    return out


# -- describing --------------------------------------------------------------------------------


def _head(fp: Fingerprint) -> str:
    ref = fp.head_ref.removeprefix("refs/heads/") if fp.head_ref else "(detached)"
    return f"{ref}@{fp.head_sha[:12]}" if fp.head_sha else f"{ref}@(no commit)"


def _xy(code: str | None) -> str:
    return f"'{code}'" if code else "clean"


def _status_change(
    path: str, old: str | None, new: str | None, old_stat: Stat | None, new_stat: Stat | None
) -> str | None:
    """One path's change, as `git status` and its lstat show it; None when there is none."""
    if old == new:
        if old_stat == new_stat or old_stat is None or new_stat is None:
            return None
        if stat.S_IFMT(old_stat[3]) != stat.S_IFMT(new_stat[3]):
            return f"{path} changed type"
        return f"modified file {path} ({_what_changed(old_stat, new_stat)})"
    if old is None and new == "??":
        return f"new file {path}"
    if new is None and old == "??":
        return f"deleted file {path}"
    if old is None and new is not None and new[1] == "D":
        return f"deleted file {path}"
    if old is None and new is not None and new[1] == "M" and new[0] in " M":
        return f"modified file {path}"
    return f"git status of {path} changed from {_xy(old)} to {_xy(new)}"


def _what_changed(old: Stat, new: Stat) -> str:
    fields = (("size", 0), ("mtime", 1), ("mode", 3))
    what = [name for name, at in fields if old[at] != new[at]]
    return ", ".join(what) or "rewritten with its old size and mtime"


def _index_change(path: str, old: str | None, new: str | None) -> str:
    if (old or "").startswith("flag ") or (new or "").startswith("flag "):
        return f"index flags of {path} changed (assume-unchanged or skip-worktree)"
    return f"staged content of {path} changed"


def _git_file_changes(before: Fingerprint, after: Fingerprint) -> list[str]:
    out = []
    for label in sorted(before.git_files.keys() | after.git_files.keys()):
        old, new = before.git_files.get(label), after.git_files.get(label)
        if old == new:
            continue
        if label.startswith(".git/hooks/"):
            verb = "added" if old is None else "removed" if new is None else "changed"
            out.append(f"hook {verb}: {label.removeprefix('.git/hooks/')}")
        elif old is None or new is None:
            out.append(f"{label} {'created' if old is None else 'deleted'}")
        else:
            out.append(f"{label} changed{_config_delta(old, new)}")
    return out


def _config_delta(before: GitFile, after: GitFile) -> str:
    """What changed in a config file, entry by entry (read only when it did change)."""
    if before.path.name not in _CONFIG_NAMES or after.path.name not in _CONFIG_NAMES:
        return ""
    old, new = set(config_entries(before.body)), set(config_entries(after.body))
    parts = [f"+{e}" for e in sorted(new - old)] + [f"-{e}" for e in sorted(old - new)]
    if not parts:
        return ""
    more = f", … ({len(parts) - 5} more)" if len(parts) > 5 else ""
    return ": " + ", ".join(parts[:5]) + more
