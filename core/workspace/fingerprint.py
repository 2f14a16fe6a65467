"""A fingerprint of the main checkout, taken before and after every agent run.

The invariant is that no agent ever writes the main checkout; only a human merge does.
An agent runs in its own worktree, but nothing in the operating system stops it from
writing elsewhere, and a linked worktree can legitimately write the repository's shared
`.git/config` and `.git/hooks`, which then act in every checkout, the main one included.
So T25 does not trust: it measures. Anything a run changed here fails the run, with a
list of what changed that a person can read.

What is measured, and why:

* HEAD (its symbolic ref and commit): a commit, reset or checkout in the main checkout.
* `git status` and the index (staged blob of every path): staging, which changes no file.
* Every file and directory outside `.git`, `.factory/` and the worktree root, by lstat
  (size, mtime_ns, mode): cheap enough for large trees, and it covers ignored and
  untracked files, which `git status` summarises or hides.
* `.git/config`, `config.worktree`, `info/attributes` and every file under the hooks
  directory, by content hash and mode: these are how a worktree plants programs that run
  in the main checkout (a hook, a filter, `core.hooksPath`, `core.fsmonitor`).

Excluded: `.factory/` (T25's own store, audit log and worktrees) and the worktree root,
which agents are meant to write. Refs other than HEAD's are not measured: task branches
live in the shared ref store and move on every agent commit.
"""

from __future__ import annotations

import asyncio
import hashlib
import os
import stat
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from pathlib import Path

from core.workspace.git import git, git_bytes, status_entries

FACTORY_DIR = ".factory"
# The repository files, relative to the git dirs, whose change means a planted program.
_COMMON_FILES = ("config", "info/attributes")
_PER_CHECKOUT_FILES = ("config.worktree",)
_CONFIG_FILES = frozenset({"config", "config.worktree"})

Stat = tuple[int, int, int]  # size, mtime_ns, mode (size and mtime are 0 for a directory)


@dataclass(frozen=True)
class Fingerprint:
    """What the main checkout looked like at one moment; compare two with `changed`."""

    head_ref: str | None  # "refs/heads/trunk", None when detached or unborn
    head_sha: str | None  # None on an unborn branch
    status: Mapping[str, str]  # path -> porcelain v1 XY code ("??", "!!", " M", …)
    index: Mapping[str, str]  # path -> "mode blob stage"
    files: Mapping[str, Stat]  # path -> lstat summary
    git_files: Mapping[str, str]  # "config", "hooks/pre-commit", … -> "mode:sha256"
    config: Mapping[str, tuple[str, ...]] = field(default_factory=dict)  # name -> key=value


async def fingerprint(repo: Path, *, exclude: Iterable[Path] = ()) -> Fingerprint:
    """Fingerprint the main checkout at `repo`, skipping `.factory/` and `exclude`
    (pass the worktree root when it is configured somewhere else inside the repository)."""
    repo = repo.resolve()
    skip = _skipped(repo, exclude)
    # Only `status` can run a repository's filters (to compare content); the other reads
    # run nothing, so they skip the driver lookup. All of them run at once.
    dirs, ref, sha, raw_status, raw_index = await asyncio.gather(
        git(
            "rev-parse",
            "--path-format=absolute",
            "--git-dir",
            "--git-common-dir",
            cwd=repo,
            drivers_from=(),
        ),
        git("symbolic-ref", "--quiet", "HEAD", cwd=repo, check=False, drivers_from=()),
        git(
            "rev-parse",
            "--quiet",
            "--verify",
            "HEAD^{commit}",
            cwd=repo,
            check=False,
            drivers_from=(),
        ),
        # --ignore-submodules=all: a submodule's status would be computed by a child git
        # reading the submodule's own config; its files are covered by the walk instead.
        git_bytes(
            "status",
            "--porcelain=v1",
            "-z",
            "--ignored=traditional",
            "--untracked-files=normal",
            "--ignore-submodules=all",
            cwd=repo,
        ),
        git_bytes("ls-files", "--stage", "-z", cwd=repo, drivers_from=()),
    )
    git_dir, common = (Path(p) for p in dirs.splitlines())
    files, git_files = await asyncio.to_thread(_scan, repo, skip, git_dir, common)
    config = {
        name: await _config_entries(path, repo)
        for name, path in (
            ("config", common / "config"),
            ("config.worktree", git_dir / "config.worktree"),
        )
        if path.is_file()
    }
    return Fingerprint(
        head_ref=ref or None,
        head_sha=sha or None,
        status={p: xy for xy, p in status_entries(raw_status) if not _under(p, skip)},
        index=_index(raw_index),
        files=files,
        git_files=git_files,
        config=config,
    )


def changed(before: Fingerprint, after: Fingerprint) -> list[str]:
    """What differs, one human-readable line per change; [] when nothing does."""
    out: list[str] = []
    if (before.head_ref, before.head_sha) != (after.head_ref, after.head_sha):
        out.append(f"HEAD moved from {_head(before)} to {_head(after)}")
    out += _git_file_changes(before, after)
    reported: set[str] = set()
    for path in sorted(before.files.keys() | after.files.keys()):
        line = _file_change(path, before.files.get(path), after.files.get(path))
        if line:
            out.append(line)
            reported.add(path)
    for path in sorted(before.status.keys() | after.status.keys()):
        old, new = before.status.get(path), after.status.get(path)
        if old != new and path.rstrip("/") not in reported:
            out.append(f"git status of {path} changed from {_xy(old)} to {_xy(new)}")
            reported.add(path.rstrip("/"))
    for path in sorted(before.index.keys() | after.index.keys()):
        if before.index.get(path) != after.index.get(path) and path not in reported:
            out.append(f"staged content of {path} changed")
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


def _scan(
    repo: Path, skip: tuple[str, ...], git_dir: Path, common: Path
) -> tuple[dict[str, Stat], dict[str, str]]:
    """The checkout's files, and the repository's own files that can run or redirect code."""
    return _walk(repo, skip), _git_files(git_dir, common)


def _walk(repo: Path, skip: tuple[str, ...]) -> dict[str, Stat]:
    """Every file and directory of the checkout but `.git` and `skip`, with its stat."""
    files: dict[str, Stat] = {}
    stack = [""]
    while stack:
        rel_dir = stack.pop()
        try:
            entries = list(os.scandir(repo / rel_dir if rel_dir else repo))
        except (FileNotFoundError, NotADirectoryError):
            continue  # removed while we looked: its absence shows in the next fingerprint
        for entry in entries:
            rel = f"{rel_dir}/{entry.name}" if rel_dir else entry.name
            if rel == ".git" or _under(rel, skip):
                continue
            try:
                st = entry.stat(follow_symlinks=False)
            except FileNotFoundError:
                continue
            if stat.S_ISDIR(st.st_mode):
                files[rel] = (0, 0, st.st_mode)  # a directory's mtime moves with its children
                stack.append(rel)
            else:
                files[rel] = (st.st_size, st.st_mtime_ns, st.st_mode)
    return files


def _git_files(git_dir: Path, common: Path) -> dict[str, str]:
    """The hashed config, hooks and other files of the repository that can run code."""
    git_files: dict[str, str] = {}
    for name in _COMMON_FILES:
        _hash_into(git_files, name, common / name)
    for name in _PER_CHECKOUT_FILES:
        _hash_into(git_files, name, git_dir / name)
    hooks = common / "hooks"
    if hooks.is_symlink():
        _hash_into(git_files, "hooks", hooks)
    for dirpath, dirnames, filenames in os.walk(hooks):
        for name in dirnames + filenames:
            path = Path(dirpath) / name
            if not path.is_dir() or path.is_symlink():
                _hash_into(git_files, f"hooks/{path.relative_to(hooks).as_posix()}", path)
    return git_files


def _hash_into(into: dict[str, str], name: str, path: Path) -> None:
    """Record mode and content (or a symlink's target): `chmod +x` on a hook matters."""
    try:
        st = path.lstat()
        body = os.readlink(path).encode() if stat.S_ISLNK(st.st_mode) else path.read_bytes()
    except FileNotFoundError:
        return
    into[name] = f"{st.st_mode:o}:{hashlib.sha256(body).hexdigest()}"


async def _config_entries(path: Path, repo: Path) -> tuple[str, ...]:
    """`key=value` lines of one config file, to say *what* changed in it. `--file` reads
    just that file (no includes) and runs nothing; an unparsable file yields ()."""
    out = await git_bytes(
        "config", "--file", str(path), "--null", "--list", cwd=repo, check=False, drivers_from=()
    )
    return tuple(sorted(e.replace("\n", "=", 1) for e in os.fsdecode(out).split("\0") if e))


def _index(raw: bytes) -> dict[str, str]:
    out: dict[str, str] = {}
    for entry in filter(None, os.fsdecode(raw).split("\0")):
        meta, _, path = entry.partition("\t")
        out[path] = meta if path not in out else f"{out[path]} {meta}"
    return out


# -- describing --------------------------------------------------------------------------------


def _head(fp: Fingerprint) -> str:
    ref = fp.head_ref.removeprefix("refs/heads/") if fp.head_ref else "(detached)"
    return f"{ref}@{fp.head_sha[:12]}" if fp.head_sha else f"{ref}@(no commit)"


def _xy(code: str | None) -> str:
    return f"'{code}'" if code else "clean"


def _file_change(path: str, old: Stat | None, new: Stat | None) -> str | None:
    if old == new:
        return None
    kind = "directory" if stat.S_ISDIR((new or old or (0, 0, 0))[2]) else "file"
    if old is None:
        return f"new {kind} {path}"
    if new is None:
        return f"deleted {kind} {path}"
    if stat.S_IFMT(old[2]) != stat.S_IFMT(new[2]):
        return f"{path} changed type"
    what = [
        w
        for w, a, b in (
            ("size", old[0], new[0]),
            ("mtime", old[1], new[1]),
            ("mode", old[2], new[2]),
        )
        if a != b
    ]
    return f"modified {kind} {path} ({', '.join(what)})"


def _git_file_changes(before: Fingerprint, after: Fingerprint) -> list[str]:
    out = []
    for name in sorted(before.git_files.keys() | after.git_files.keys()):
        old, new = before.git_files.get(name), after.git_files.get(name)
        if old == new:
            continue
        if name.startswith("hooks/"):
            verb = "added" if old is None else "removed" if new is None else "changed"
            out.append(f"hook {verb}: {name.removeprefix('hooks/')}")
            continue
        label = f".git/{name}"
        if old is None or new is None:
            out.append(f"{label} {'created' if old is None else 'deleted'}")
        elif name in _CONFIG_FILES:
            out.append(f"{label} changed{_config_delta(before, after, name)}")
        else:
            out.append(f"{label} changed")
    return out


def _config_delta(before: Fingerprint, after: Fingerprint, name: str) -> str:
    old, new = set(before.config.get(name, ())), set(after.config.get(name, ()))
    parts = [f"+{e}" for e in sorted(new - old)] + [f"-{e}" for e in sorted(old - new)]
    if not parts:
        return ""
    more = f", … ({len(parts) - 5} more)" if len(parts) > 5 else ""
    return ": " + ", ".join(parts[:5]) + more
