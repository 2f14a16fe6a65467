"""Who owns a task worktree: one T25 installation, named after its store.

Every worktree T25 makes has an ownership record outside the tree (`<root>/.meta/<id>.json`:
owner, task, branch, path; core.workspace.task_trees), and T25 adopts, commits in, cleans up
or merges a tree only when the record names this installation. That is what keeps two
installations apart when they share a worktree root: each has its own store, so each its
own `T-1`, and neither may touch the other's.

An installation is its store. `t25 serve`, `t25 run` and every command on one store are one
owner, `owner_of(store URL)`. A remote worker has no store: it asks the serve it works for
(`GET /worker/owner`) and makes its worktrees under serve's name, so that on serve's own
checkout the tree a worker made is serve's to remove after the merge, and `t25 cleanup`'s.
A serve that does not answer that (an older one) leaves the worker its former name, the
hash of serve's URL; and a worker that learns serve's name still adopts the worktrees it
made under the former one (`matches`), so an upgrade fails none of the tasks under way.
"""

from __future__ import annotations

import hashlib
import json
import os
from collections.abc import Sequence
from pathlib import Path

from core.errors import WorktreeRefused


def owner_of(url: str) -> str:
    """The ownership name of the installation behind a store or control-plane URL."""
    return hashlib.sha256(url.encode()).hexdigest()[:16]


def matches(key: str, got: object, want: str, former: Sequence[str]) -> bool:
    """Whether a record's `key` holds what this installation wants there: for the owner, its
    name or one it went by before (`former`)."""
    return got == want or (key == "owner" and got in former)


def read_record(record: Path) -> dict[str, object] | None:
    """The ownership record at `record`, None when there is none; refused when it is a
    symbolic link or not a JSON object."""
    try:
        fd = os.open(record, os.O_RDONLY | os.O_NOFOLLOW | os.O_CLOEXEC)
    except FileNotFoundError:
        return None
    except OSError as exc:  # ELOOP: the record itself is a symlink
        raise WorktreeRefused(
            f"the ownership record {record} cannot be trusted: {exc.strerror}",
            hint=f"remove {record} and the worktree it describes",
        ) from None
    with os.fdopen(fd, encoding="utf-8") as fh:
        try:
            data = json.load(fh)
        except ValueError:
            data = None
    if not isinstance(data, dict):
        raise WorktreeRefused(
            f"the ownership record {record} is unreadable",
            hint=f"remove {record} and the worktree it describes",
        )
    return data


def write_record(record: Path, body: dict[str, object]) -> None:
    """Atomically: a temp file created exclusively (never through a link), then rename."""
    tmp = record.with_name(f".{record.stem}.{os.getpid()}.tmp")
    tmp.unlink(missing_ok=True)
    flags = os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC
    fd = os.open(tmp, flags, 0o644)
    with os.fdopen(fd, "w", encoding="utf-8") as fh:
        json.dump(body, fh, indent=2)
        fh.flush()
        os.fsync(fh.fileno())
    os.replace(tmp, record)
