"""Submodules in task worktrees: checked out from the main checkout's own copies, and never
changed behind T25's back.

A new worktree holds each submodule as an empty directory. T25 checks out every submodule
the main checkout has initialised, at the commit the tree records, by cloning the main
checkout's own submodule repository (`<git dir>/modules/<name>`): no network, and the URL
in `.gitmodules` or `.git/config` is never used (`submodule.<name>.url` is set for that one
call, `protocol.file.allow` too, and the update mode is forced to `checkout`, so a
`submodule.<name>.update = !command` never runs). A submodule the main checkout has not
initialised stays empty, as it is there.

T25 commits the repository's own files; a submodule is another repository. A change inside
one — a new commit, changed or untracked files, files written into one that is not checked
out, or a new submodule — is refused with the submodule's path, never dropped and never
committed as a gitlink to a commit that exists only in the worktree.
"""

from __future__ import annotations

import asyncio
import os
import shutil
from dataclasses import dataclass
from pathlib import Path

from core.errors import WorktreeRefused
from core.workspace.git import git, git_bytes, run_git

GITLINK = "160000"
_SHOWN = 5


@dataclass(frozen=True)
class Submodule:
    """A submodule the tree records: its name (in `.gitmodules`) and its path."""

    name: str
    path: str


async def gitlinks(tree: Path) -> tuple[str, ...]:
    """The paths the index of `tree` records as submodules (gitlinks): none when its index
    file holds no entry of a gitlink's mode, seen without a process; else as `git ls-files`
    lists them."""
    if await asyncio.to_thread(_none_in_index, tree):
        return ()
    raw = await git_bytes("ls-files", "--stage", "-z", cwd=tree, drivers_from=())
    return tuple(os.fsdecode(path) for path in _gitlink_paths(raw))


# A gitlink's mode (0o160000) as an index entry stores it: 32 bits, big-endian.
_GITLINK_MODE = (0o160000).to_bytes(4, "big")


def _none_in_index(tree: Path) -> bool:
    """Whether the index git reads in `tree` certainly has no gitlink: no 4 bytes of the
    file spell a gitlink's mode, so no entry has it (a listing of 50,000 files takes 2 ms
    to read and search, `git ls-files` 37 ms). False when unsure: no index where git keeps
    it, a split index (its entries are in a shared file), or those bytes anywhere."""
    dot_git = tree / ".git"
    try:
        if dot_git.is_dir():
            git_dir = dot_git
        else:
            pointer = dot_git.read_text(encoding="utf-8")
            if not pointer.startswith("gitdir:"):
                return False
            git_dir = tree / pointer.removeprefix("gitdir:").strip()
        if any(name.startswith("sharedindex.") for name in os.listdir(git_dir)):
            return False
        index = (git_dir / "index").read_bytes()
    except (OSError, UnicodeDecodeError):
        return False
    return index.startswith(b"DIRC") and _GITLINK_MODE not in index


def _gitlink_paths(listing: bytes) -> list[bytes]:
    """The paths of the gitlink entries of an `ls-files --stage -z` listing, found by their
    mode at an entry's start: split into entries, 50,000 files took 17 ms a call, a regular
    expression 70; this finds them in 6."""
    head = GITLINK.encode() + b" "
    starts = [0] if listing.startswith(head) else []
    at = listing.find(b"\0" + head)
    while at != -1:
        starts.append(at + 1)
        at = listing.find(b"\0" + head, at + 1)
    out = []
    for start in starts:
        end = listing.find(b"\0", start)
        entry = listing[start:] if end == -1 else listing[start:end]
        out.append(entry.partition(b"\t")[2])
    return out


async def submodules(tree: Path) -> tuple[Submodule, ...]:
    """The submodules of `tree` with their names, as `.gitmodules` maps paths to names."""
    links = await gitlinks(tree)
    if not links:
        return ()
    raw = await git_bytes(
        "config", "--file", ".gitmodules", "--null", "--get-regexp", r"^submodule\..*\.path$",
        cwd=tree, check=False, drivers_from=(),
    )  # fmt: skip
    names: dict[str, str] = {}
    for entry in filter(None, os.fsdecode(raw).split("\0")):
        key, _, path = entry.partition("\n")
        names[path.strip("/")] = key.removeprefix("submodule.").removesuffix(".path")
    return tuple(Submodule(names.get(path, path), path) for path in links)


async def check_out(tree: Path, common_dir: Path) -> None:
    """Check out, in the worktree `tree`, every submodule the main checkout has initialised
    (its repository at `<common_dir>/modules/<name>`), from that repository alone."""
    for sub in await submodules(tree):
        source = common_dir / "modules" / sub.name
        if not (source / "HEAD").is_file() or not source.resolve().is_relative_to(common_dir):
            continue  # not initialised in the main checkout: empty here too
        done = await run_git(
            "submodule", "update", "--checkout", "--", sub.path,
            cwd=tree,
            config=(
                (f"submodule.{sub.name}.url", str(source)),
                (f"submodule.{sub.name}.active", "true"),
                (f"submodule.{sub.name}.update", "checkout"),
                ("protocol.file.allow", "always"),
            ),
        )  # fmt: skip
        if done.code != 0:
            raise WorktreeRefused(
                f"could not check out the submodule {sub.path} from the main checkout's "
                f"{source}: {_reason(done.err)}",
                hint=f"bring the submodule up to date in the main checkout (git submodule "
                f"update -- {sub.path}), then retry",
            )


async def changes(tree: Path) -> tuple[str, ...]:
    """Each change inside a submodule of `tree`, as `path (what)`."""
    links = await gitlinks(tree)
    if not links:
        return ()
    raw = await git_bytes(
        "status", "--porcelain=v2", "-z", "--ignore-submodules=none", "--untracked-files=all",
        cwd=tree,
    )  # fmt: skip
    out = []
    fields = os.fsdecode(raw).split("\0")
    i = 0
    while i < len(fields):
        entry = fields[i]
        i += 1
        kind = entry[:2]
        if kind not in ("1 ", "2 "):
            continue
        parts = entry.split(" ", 9 if kind == "1 " else 10)
        xy, sub, path = parts[1], parts[2], parts[-1]
        if kind == "2 ":
            i += 1  # the original path follows
        if sub.startswith("S") and (xy != ".." or sub != "S..."):
            out.append(f"{path} ({_what(xy, sub)})")
    for path in links:
        where = tree / path
        if not (where / ".git").exists() and where.is_dir() and any(where.iterdir()):
            out.append(f"{path} (files written into it, and it is not checked out)")
    return tuple(out)


async def staged(tree: Path) -> bytes:
    """What the index of `tree` changes since HEAD: `git diff --cached --raw -z` (empty
    when nothing)."""
    return await git_bytes(
        "diff", "--cached", "--raw", "-z", "--no-renames", "--no-ext-diff", "HEAD",
        cwd=tree, drivers_from=(),
    )  # fmt: skip


def gitlinks_staged(raw: bytes) -> tuple[str, ...]:
    """The gitlinks a `staged` listing adds or moves (a repository the agent made inside
    the tree, which `git add --all` stages as a submodule), as `path (what)`."""
    fields = os.fsdecode(raw).split("\0")
    out = []
    for meta, path in zip(fields[::2], fields[1::2], strict=False):
        old_mode, new_mode = meta.lstrip(":").split()[:2]
        if new_mode == GITLINK:
            out.append(f"{path} ({'a new commit' if old_mode == GITLINK else 'a new submodule'})")
    return tuple(out)


def _what(xy: str, sub: str) -> str:
    if "A" in xy:
        return "a new submodule"
    said = [
        text
        for flag, text in zip(
            sub[1:], ("a new commit", "changed files", "untracked files"), strict=True
        )
        if flag != "."
    ]
    return ", ".join(said) or "its recorded commit changed"


async def refuse_changes(tree: Path) -> None:
    """Refuse (WorktreeRefused) a tree with a change inside a submodule, naming them."""
    _refuse(await changes(tree))


async def refuse_staged(tree: Path) -> bytes:
    """After `git add --all`: refuse (WorktreeRefused) the gitlinks the index of `tree`
    adds or moves, naming them; else what it stages (`staged`: empty when nothing)."""
    raw = await staged(tree)
    _refuse(gitlinks_staged(raw))
    return raw


def _refuse(found: tuple[str, ...]) -> None:
    if found:
        shown = "; ".join(found[:_SHOWN]) + (
            f" … and {len(found) - _SHOWN} more" * (len(found) > _SHOWN)
        )
        raise WorktreeRefused(
            f"T25 does not commit changes inside a submodule: {shown}",
            hint="make the change in the submodule's own repository, or undo it in the "
            "worktree; T25 commits the repository's own files only",
        )


async def take_down(tree: Path, admin: Path) -> str:
    """Before a worktree is removed (git refuses to remove one with a submodule checked out,
    or with its submodules' repositories in `admin`, the worktree's entry): empty each
    submodule's directory and remove those repositories, once `changes` found nothing.
    So each submodule holds its recorded commit, and its repository is the worktree's own
    clone of the main checkout's; refused (why, in words) when one holds a file it does
    not track or a commit the main checkout's copy lacks. '' when done."""
    for path in await gitlinks(tree):
        where = tree / path
        if where.is_symlink() or not (where / ".git").is_file():
            continue  # not checked out: nothing of it to take down
        top = await git("rev-parse", "--show-toplevel", cwd=where, drivers_from=())
        if Path(top).resolve() != where.resolve():
            continue  # not a checkout of its own: left to git's refusal
        left = await git("status", "--porcelain", "--ignored", "--untracked-files=all", cwd=where)
        if left:
            names = [line[3:] for line in left.splitlines()]
            return (
                f"the submodule {path} holds files it does not track: {', '.join(names[:_SHOWN])}"
            )
        own = await git(
            "rev-list", "--max-count=1", "--all", "--not", "--remotes", cwd=where, drivers_from=()
        )
        if own:
            return (
                f"the submodule {path} holds commits the main checkout's copy lacks "
                f"({own[:12]}); push or fetch them there"
            )
        # Emptied by T25 once found clean: `git submodule deinit` would also drop the
        # submodule's section from the config the main checkout shares with this worktree.
        shutil.rmtree(where)
        where.mkdir()
    modules = admin / "modules"
    if modules.is_dir() and not modules.is_symlink():
        shutil.rmtree(modules)
    return ""


def _reason(stderr: str) -> str:
    lines = [line.strip() for line in stderr.splitlines() if line.strip()]
    errors = [line for line in lines if line.startswith(("fatal:", "error:"))]
    line = (errors or lines or ["no reason given"])[0]
    return line.split(":", 1)[1].strip() if line.startswith(("fatal:", "error:")) else line
