"""`git status --porcelain=v2 -z --branch`, read: HEAD, each listed path's status and what
its index entry holds, from one git process (core.workspace.fingerprint took four before:
`symbolic-ref HEAD`, `rev-parse HEAD`, `status --porcelain=v1` and `diff --cached`)."""

from __future__ import annotations

import os
from dataclasses import dataclass


@dataclass(frozen=True)
class Status:
    head_ref: str | None  # "refs/heads/trunk"; None when detached
    head_sha: str | None  # None on an unborn branch
    status: dict[str, str]  # path -> the porcelain v1 XY code ("??", " M", "A ", "UU", …)
    staged: dict[str, str]  # path -> its index entry where it differs from HEAD's


def read_status(raw: bytes) -> Status:
    """Parse the NUL-separated records (renames are not asked for: `--no-renames`)."""
    head_ref = head_sha = None
    status: dict[str, str] = {}
    staged: dict[str, str] = {}
    records = iter(os.fsdecode(raw).split("\0"))
    for record in records:
        kind, _, rest = record.partition(" ")
        if kind == "#":
            key, _, value = rest.partition(" ")
            if key == "branch.oid" and value != "(initial)":
                head_sha = value
            elif key == "branch.head" and value != "(detached)":
                head_ref = f"refs/heads/{value}"
        elif kind in ("?", "!"):
            status[rest] = kind * 2
        elif kind == "1":  # XY sub mH mI mW hH hI path
            xy, _sub, m_head, m_index, _m_tree, h_head, h_index, path = rest.split(" ", 7)
            status[path] = _v1(xy)
            if xy[0] != ".":
                staged[path] = f"{m_head} {m_index} {h_head} {h_index} {xy[0]}"
        elif kind == "2":  # as 1, then the score; the source path is the next record
            xy, _sub, m_head, m_index, _m_tree, h_head, h_index, _score, path = rest.split(" ", 8)
            next(records, None)
            status[path] = _v1(xy)
            staged[path] = f"{m_head} {m_index} {h_head} {h_index} {xy[0]}"
        elif kind == "u":  # XY sub m1 m2 m3 mW h1 h2 h3 path
            xy, _sub, m1, m2, m3, _m_tree, h1, h2, h3, path = rest.split(" ", 9)
            status[path] = _v1(xy)
            staged[path] = f"unmerged {m1} {m2} {m3} {h1} {h2} {h3}"
    return Status(head_ref, head_sha, status, staged)


def _v1(xy: str) -> str:
    return xy.replace(".", " ")
