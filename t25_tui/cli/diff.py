"""`t25 diff` and `t25 show`: what a task changes, and an artifact's content.

`t25 diff ID` prints the task branch's change against the default branch, `--attempt N`
one implementing attempt's; `--stat` its files and line counts (`--json`: the shape
below); colour on a terminal (not under NO_COLOR), plain when piped, so the output applies with `git apply`.
`t25 show A-12` prints an artifact as stored, after the store re-hashed it: content that
no longer matches its SHA-256 is refused (exit 1). What is said about either (where a
diff was read from, an artifact's provenance) goes to stderr.

`t25 diff ID --stat --json` prints one object:

    {"task": "T-3", "attempt": null, "attempts": 2, "run": null, "source": "git",
     "base": "<sha>", "tip": "<sha>", "files": [{"path": "app.py", "old_path": null,
     "insertions": 12, "deletions": 3, "binary": false}], "insertions": 12, "deletions": 3}

`attempt` and `run` are null for the whole change; `source` is `git`, `artifact` (the
diff a run reported, when the branch is not in this repository) or `none`.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
from typing import Any, TextIO

from core.domain.diffs import TaskDiff
from core.domain.text import printable
from core.ports import Operations
from t25_tui.cli.context import run

_COLOURS = (
    ("diff --git ", "\x1b[1m"),
    ("+++ ", "\x1b[1m"),
    ("--- ", "\x1b[1m"),
    ("@@", "\x1b[36m"),
    ("+", "\x1b[32m"),
    ("-", "\x1b[31m"),
)


def colour_wanted(stream: TextIO) -> bool:
    """Colour for a terminal, unless NO_COLOR (https://no-color.org) says otherwise."""
    return stream.isatty() and not os.environ.get("NO_COLOR")


def stat_json(diff: TaskDiff) -> dict[str, Any]:
    """The documented shape of `t25 diff --stat --json`."""
    return {
        "task": diff.task_id,
        "attempt": diff.attempt,
        "attempts": diff.attempts,
        "run": diff.run_id,
        "source": diff.source,
        "base": diff.base,
        "tip": diff.tip,
        "files": [
            {
                "path": f.path,
                "old_path": f.old_path,
                "insertions": f.insertions,
                "deletions": f.deletions,
                "binary": f.binary,
            }
            for f in diff.files
        ],
        "insertions": diff.insertions,
        "deletions": diff.deletions,
    }


def stat_lines(diff: TaskDiff, *, colour: bool = False, width: int = 80) -> list[str]:
    """`git diff --stat`'s lines: a file a line with a bar, then the totals."""
    if not diff.files:
        return []
    names = [printable(f"{f.old_path} => {f.path}" if f.old_path else f.path) for f in diff.files]
    name_width = min(max(len(n) for n in names), max(width // 2, 20))
    most = max(f.insertions + f.deletions for f in diff.files) or 1
    bar_width = max(width - name_width - 12, 10)
    out = []
    for name, f in zip(names, diff.files, strict=True):
        shown = name if len(name) <= name_width else "…" + name[-(name_width - 1) :]
        if f.binary:
            out.append(f" {shown:<{name_width}} | Bin")
            continue
        total = f.insertions + f.deletions
        scale = min(1.0, bar_width / most)
        plus, minus = round(f.insertions * scale), round(f.deletions * scale)
        bar = (
            ("\x1b[32m" + "+" * plus + "\x1b[31m" + "-" * minus + "\x1b[0m")
            if colour
            else ("+" * plus + "-" * minus)
        )
        out.append(f" {shown:<{name_width}} | {total:>5} {bar}")
    n = len(diff.files)
    out.append(
        f" {n} file{'s' if n != 1 else ''} changed, {diff.insertions} insertion"
        f"{'s' if diff.insertions != 1 else ''}(+), {diff.deletions} deletion"
        f"{'s' if diff.deletions != 1 else ''}(-)"
    )
    return out


def coloured(text: str) -> str:
    """A diff coloured as git colours it; every line escaped for the terminal first."""
    out = []
    for line in printable(text, multiline=True).splitlines():
        colour = next((c for prefix, c in _COLOURS if line.startswith(prefix)), "")
        out.append(f"{colour}{line}\x1b[0m" if colour else line)
    return "\n".join(out) + ("\n" if out else "")


def describe(diff: TaskDiff) -> str:
    """What the diff is, for stderr."""
    what = (
        f"{diff.task_id} attempt {diff.attempt} of {diff.attempts} ({diff.run_id})"
        if diff.attempt
        else f"{diff.task_id}, the whole branch"
    )
    where = f"{(diff.base or '')[:12]}..{(diff.tip or '')[:12]}" if diff.source == "git" else ""
    parts = [what, where, printable(diff.note)]
    if diff.truncated:
        parts.append("cut short: the diff is over the size a read carries")
    return "t25 diff: " + " · ".join(p for p in parts if p)


def diff(args: argparse.Namespace) -> int:
    stat = args.stat or args.json

    async def body(control: Operations) -> TaskDiff:
        return await control.diff(args.id, attempt=args.attempt, stat=stat)

    found = run(args, body)
    tty = colour_wanted(sys.stdout)
    if args.json:
        print(json.dumps(stat_json(found), indent=2))
        return 0
    print(describe(found), file=sys.stderr)
    if stat:
        for line in stat_lines(found, colour=tty):
            print(line)
    elif tty:
        sys.stdout.write(coloured(found.text))
    else:
        sys.stdout.write(found.text)
    return 0


def show(args: argparse.Namespace) -> int:
    async def body(control: Operations) -> tuple[Any, bytes]:
        return await control.artifact(args.id)

    artifact, content = run(args, body)  # the store re-hashed it: damaged content raised
    meta = artifact.meta
    print(
        f"t25 show: {artifact.id} {meta.kind.value} · {artifact.size} B · sha256:"
        f"{artifact.sha256} verified · {meta.task_id or '-'} {meta.run_id or '-'} "
        f"{printable(meta.role or '')} {printable(meta.adapter or '')}".rstrip(),
        file=sys.stderr,
    )
    sys.stdout.flush()
    if sys.stdout.isatty():  # an agent may have written it: escaped for a terminal
        sys.stdout.write(printable(content.decode(errors="replace"), multiline=True))
    else:
        sys.stdout.buffer.write(content)
    return 0
