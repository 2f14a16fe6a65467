"""A task's change as a unified diff: the whole branch, or one implementing attempt's.

`TaskDiff` is what `t25 diff`, `GET /tasks/{id}/diff` and the cockpit's diff screen show;
`files_of` splits a unified diff into its files and counts each one's lines, so a diff
read from git and one kept as an artifact are measured the same way.
"""

from __future__ import annotations

import re
from typing import Literal

from pydantic import BaseModel, ConfigDict

# The most diff text a read carries (characters); past it the text is cut at a line end and
# `truncated` says so. The stat still counts every file.
MAX_DIFF_CHARS = 4_000_000

_HUNK = re.compile(r"@@ -\d+(?:,(\d+))? \+\d+(?:,(\d+))? @@")
_GIT_HEADER = re.compile(r'diff --git (?:"?a/(.*?)"?) (?:"?b/(.*?)"?)$')


class FileDiff(BaseModel):
    """One file of a diff: its path (the new one; `old_path` when renamed), its lines
    added and deleted, and its own part of the diff text."""

    model_config = ConfigDict(frozen=True, extra="forbid", defer_build=True)

    path: str
    old_path: str | None = None
    insertions: int = 0
    deletions: int = 0
    binary: bool = False
    text: str = ""


class TaskDiff(BaseModel):
    """A task's change: cumulative (`attempt` None) or one implementing attempt's.

    `source` says where it was read: `git` (the project's repository) or `artifact` (the
    diff an attempt's run reported, when the branch is not in this repository). `text` is
    empty when only the stat was asked for."""

    model_config = ConfigDict(frozen=True, extra="forbid", defer_build=True)

    task_id: str
    attempt: int | None = None
    attempts: int = 0  # how many implementing attempts the task has had
    run_id: str | None = None  # the implementing run of `attempt`
    source: Literal["git", "artifact", "none"] = "none"
    base: str | None = None  # the commit the diff is taken from (git only)
    tip: str | None = None  # ... and the one it goes to
    note: str = ""  # for a person: what this diff is, when it is not the obvious
    files: tuple[FileDiff, ...] = ()
    text: str = ""
    truncated: bool = False

    @property
    def insertions(self) -> int:
        return sum(f.insertions for f in self.files)

    @property
    def deletions(self) -> int:
        return sum(f.deletions for f in self.files)

    def stat_only(self) -> TaskDiff:
        """This diff without its text (nor each file's)."""
        files = tuple(f.model_copy(update={"text": ""}) for f in self.files)
        return self.model_copy(update={"text": "", "files": files})


def capped(text: str, limit: int = MAX_DIFF_CHARS) -> tuple[str, bool]:
    """`text` cut to at most `limit` characters at a line end, and whether it was cut."""
    if len(text) <= limit:
        return text, False
    cut = text.rfind("\n", 0, limit)
    return text[: cut + 1], True


def files_of(text: str) -> tuple[FileDiff, ...]:
    """Each file of a unified diff (`git diff` output), with its counted lines.

    Lines are counted by the hunk headers' lengths, so a deleted line that reads
    `--- x` is a deletion, not a header."""
    out: list[FileDiff] = []
    lines = text.splitlines(keepends=True)
    i, n = 0, len(lines)
    while i < n:
        if not lines[i].startswith("diff --git "):
            i += 1
            continue
        start = i
        fields = _header_fields(lines[i])
        i += 1
        added = deleted = 0
        binary = False
        while i < n and not lines[i].startswith("diff --git "):
            line = lines[i]
            hunk = _HUNK.match(line)
            if hunk:
                old = int(hunk[1]) if hunk[1] is not None else 1
                new = int(hunk[2]) if hunk[2] is not None else 1
                i += 1
                while (old > 0 or new > 0) and i < n:
                    body = lines[i]
                    if body.startswith("+"):
                        added, new = added + 1, new - 1
                    elif body.startswith("-"):
                        deleted, old = deleted + 1, old - 1
                    elif body.startswith("\\"):  # "\ No newline at end of file"
                        pass
                    else:
                        old, new = old - 1, new - 1
                    i += 1
                continue
            if line.startswith("rename from "):
                fields["old"] = line[len("rename from ") :].rstrip("\n")
            elif line.startswith("rename to "):
                fields["new"] = line[len("rename to ") :].rstrip("\n")
            elif line.startswith("+++ b/"):
                fields["new"] = line[len("+++ b/") :].rstrip("\n")
            elif line.startswith(("Binary files ", "GIT binary patch")):
                binary = True
            i += 1
        new_path, old_path = fields.get("new", ""), fields.get("old", "")
        out.append(
            FileDiff(
                path=new_path or old_path,
                old_path=old_path if old_path and old_path != new_path else None,
                insertions=added,
                deletions=deleted,
                binary=binary,
                text="".join(lines[start:i]),
            )
        )
    return tuple(out)


def _header_fields(line: str) -> dict[str, str]:
    """The old and new paths a `diff --git a/X b/Y` line names (best effort: quoted or
    spaced names are corrected by the rename and `+++` lines that follow)."""
    found = _GIT_HEADER.match(line.rstrip("\n"))
    if not found:
        return {}
    old, new = found[1], found[2]
    return {"new": new, **({"old": old} if old != new else {})}
