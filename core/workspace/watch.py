"""Every run watched, and what it changed outside its worktree put back.

A run (an agent, QA's checks, PR_OPEN's push) starts from a fingerprint of the main
checkout and ends with another (`core.workspace.fingerprint`). When they differ the run has
broken the invariant, and reporting it is not enough: a `core.fsmonitor` left in
`.git/config` runs at the operator's next `git status`. So the files git reads settings and
programs from (the shared config, hooks, `info/`, `config.worktree`, the global config)
are written back as they were, and the refs put back where they pointed (a new tag or
replace ref deleted). The changed copies go into the run's evidence, which the control
plane keeps as an artifact. HEAD's branch and the files of the main checkout are reported,
not rewritten: T25 holds no copy of them, and the operator's own work may be there.

Runs of the same repository overlap, and each one's fingerprints see what the others do.
Two rules keep one run's undo from undoing another's:

* What is put back is the state before the *oldest* run still going: a run that started
  after a plant has the plant in its own "before", and must not write it back.
* A run that puts something back tells the runs still going: each one that saw the change
  gets it noted as its own violation too (which of them made it cannot be told), and its
  "before" moves to the state as put back, so the undo is not taken for a new change.

One lock per repository orders the fingerprints and the undo of every run in this process.
Runs in other processes on the same checkout are not coordinated.
"""

from __future__ import annotations

import asyncio
import base64
import dataclasses
import json
import os
import shutil
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from pathlib import Path

from core.workspace.fingerprint import TASK_BRANCH, Fingerprint, GitFile, changed, git_changes
from core.workspace.git import run_git

Take = Callable[[], Awaitable[Fingerprint]]


@dataclass(eq=False)
class Watched:
    """One run under watch: how to fingerprint the checkout for it, what it started from."""

    take: Take
    may_move: tuple[str, ...]  # refs the run may move (its own branch, when implementing)
    before: Fingerprint
    noted: list[str] = field(default_factory=list)  # what another run's undo found meanwhile


@dataclass(frozen=True)
class Undone:
    """What a run changed outside its worktree, and what T25 put back."""

    changes: tuple[str, ...] = ()
    put_back: tuple[str, ...] = ()  # the files (by label) and refs written back
    evidence: str = ""  # JSON: the changed copies, as the run left them


class Watch:
    """The runs going on in one repository, each with the fingerprint it started from."""

    def __init__(self, repo: Path) -> None:
        self.repo = repo
        self._runs: list[Watched] = []  # oldest first
        self._lock = asyncio.Lock()

    async def start(self, take: Take, *, may_move: tuple[str, ...] = ()) -> Watched:
        async with self._lock:
            watched = Watched(take, may_move, await take())
            self._runs.append(watched)
        return watched

    def abandon(self, watched: Watched) -> None:
        """Stop watching a run that ends without `finish` (it was cancelled)."""
        if watched in self._runs:
            self._runs.remove(watched)

    async def finish(self, watched: Watched, *, confined: bool = False) -> Undone:
        """What changed since the run started (and what others noted for it), put back.
        A `confined` run - all it ran was in a sandbox that kept the main checkout out of
        its reach - answers for nothing: what changed is someone else's (the operator's),
        and nothing is put back."""
        async with self._lock:
            if watched not in self._runs:
                return Undone()
            if confined:
                self._runs.remove(watched)
                return Undone()
            after = await watched.take()
            changes = [*watched.noted, *changed(watched.before, after, may_move=watched.may_move)]
            undone = Undone(tuple(changes))
            if changes:
                # The shared files and refs as the oldest run going found them; this run's
                # own worktree config as it found it.
                oldest = _shared(self._runs[0].before)
                files = {**_own_files(watched.before), **oldest.git_files}
                undone = await self._put_back(changes, files, dict(oldest.refs), after)
                self._tell_the_others(watched, after, oldest)
            self._runs.remove(watched)
        return undone

    async def _put_back(
        self, changes: list[str], files: dict[str, GitFile], refs: dict[str, str], now: Fingerprint
    ) -> Undone:
        put_back: list[str] = []
        copies: dict[str, object] = {}
        await self._put_back_files(files, now, changes, put_back, copies)
        await self._put_back_refs(refs, now, changes, put_back, copies)
        evidence = json.dumps({"changes": changes, "changed_copies": copies}, indent=2)
        return Undone(tuple(changes), tuple(put_back), evidence)

    @staticmethod
    async def _put_back_files(
        files: dict[str, GitFile],
        now: Fingerprint,
        changes: list[str],
        put_back: list[str],
        copies: dict[str, object],
    ) -> None:
        """Write git's own files back as `files` has them; the changed copies go to `copies`."""
        # Shorter labels first: a planted `.git/hooks` link goes before the hooks under it,
        # which are then all written again (the same content, read through the link, is gone).
        relinked: list[str] = []
        for label in sorted(files.keys() | now.git_files.keys(), key=lambda k: (len(k), k)):
            old, new = files.get(label), now.git_files.get(label)
            if old == new and not any(label.startswith(f"{d}/") for d in relinked):
                continue
            if (old and old.is_link) or (new and new.is_link):
                relinked.append(label)
            try:
                await asyncio.to_thread(_write_back, old, new)
            except OSError as exc:
                changes.append(f"could not put back {label}: {exc.strerror}")
                continue
            put_back.append(label)
            copies[label] = _copy(new)

    async def _put_back_refs(
        self,
        refs: dict[str, str],
        now: Fingerprint,
        changes: list[str],
        put_back: list[str],
        copies: dict[str, object],
    ) -> None:
        """Move every shared ref back to where `refs` has it (HEAD's branch is the checkout's)."""
        now_refs = _shared(now).refs
        for name in sorted(refs.keys() | now_refs.keys()):
            old_sha, new_sha = refs.get(name), now_refs.get(name)
            if old_sha == new_sha or name == now.head_ref:
                continue
            # The value it has now as the expected old one: a ref that moved again is left.
            args = (name, old_sha, new_sha or "") if old_sha else ("-d", name, new_sha or "")
            done = await run_git("update-ref", *args, cwd=self.repo, drivers_from=())
            if done.code != 0:
                changes.append(f"could not put back {name}: {done.err.strip()}")
                continue
            put_back.append(name)
            copies[name] = {"ref": new_sha}

    def _tell_the_others(self, watched: Watched, now: Fingerprint, put_back: Fingerprint) -> None:
        """Note the change for every other run that saw it, and move their "before" to the
        state as put back, so that the undo is not taken for a change of theirs."""
        for other in self._runs:
            if other is not watched:
                other.noted += git_changes(_shared(other.before), _shared(now))
                other.before = dataclasses.replace(
                    other.before,
                    git_files={**_own_files(other.before), **put_back.git_files},
                    refs={**_own_refs(other.before), **put_back.refs},
                )


def _shared(fp: Fingerprint) -> Fingerprint:
    """`fp` with only what every run measures: not a worktree's own config or branch."""
    own_files, own_refs = _own_files(fp), _own_refs(fp)
    return dataclasses.replace(
        fp,
        git_files={k: v for k, v in fp.git_files.items() if k not in own_files},
        refs={k: v for k, v in fp.refs.items() if k not in own_refs},
    )


def _own_files(fp: Fingerprint) -> dict[str, GitFile]:
    return {k: v for k, v in fp.git_files.items() if k.startswith(".git/worktrees/")}


def _own_refs(fp: Fingerprint) -> dict[str, str]:
    return {k: v for k, v in fp.refs.items() if TASK_BRANCH.fullmatch(k)}


def _write_back(old: GitFile | None, now: GitFile | None) -> None:
    """Make the file at its path what `old` was: absent when `old` is None."""
    if old is None:
        if now is not None:
            _remove(now.path)
        return
    path = old.path
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(f".{path.name}.t25-put-back")
    _remove(tmp)
    if old.is_link:
        os.symlink(os.fsdecode(old.body), tmp)
    else:
        fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC)
        with os.fdopen(fd, "wb") as fh:
            fh.write(old.body)
            os.fchmod(fh.fileno(), old.mode & 0o7777)
    if path.is_dir() and not path.is_symlink():
        shutil.rmtree(path)
    os.replace(tmp, path)


def _remove(path: Path) -> None:
    if path.is_dir() and not path.is_symlink():
        shutil.rmtree(path)
    else:
        path.unlink(missing_ok=True)


def _copy(found: GitFile | None) -> dict[str, str] | None:
    """A changed file as the evidence keeps it: text when it is UTF-8, else base64."""
    if found is None:
        return None
    kind = "link" if found.is_link else "content"
    try:
        return {"mode": f"{found.mode:o}", kind: found.body.decode()}
    except UnicodeDecodeError:
        return {"mode": f"{found.mode:o}", f"{kind}_base64": base64.b64encode(found.body).decode()}
