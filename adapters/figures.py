"""A check's test figures, read from what its runner left: pytest's final summary line, or
a JUnit XML report (core.domain.figures).

Both are written by code an agent wrote, so both are read as hostile: the summary line only
from the output's last lines, each line bounded, every word and number checked; the XML
report only inside the tree, never through a symlink, only a regular file the check wrote,
at most MAX_XML_BYTES, by a parser that refuses a document type declaration (so no entity,
no billion laughs, nothing fetched). Whatever does not read as a runner's report gives no
figures: never an exception.
"""

from __future__ import annotations

import contextlib
import os
import re
import stat
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path, PurePosixPath
from typing import Never
from xml.parsers import expat

from core.config.policy_config import QACheck
from core.domain.figures import MAX_COUNT, Figures

MAX_XML_BYTES = 16 * 1024 * 1024
# pytest's summary is the output's last line; a plugin or a warning may print a few after.
SUMMARY_LINES = 20
MAX_LINE = 400
# A JUnit report nests suites, cases and their outcomes a few levels deep, not hundreds.
MAX_DEPTH = 64

_ANSI = re.compile(r"\x1b\[[0-9;]*[A-Za-z]")
# `==== 41 passed, 3 skipped in 2.01s ====`; with -q, the same without the rules.
_SUMMARY = re.compile(
    r"^(?P<rule>=+ )?(?P<body>[a-z0-9, ]+?)"
    r"(?: in [0-9]+(?:\.[0-9]+)?s(?: \([0-9:]+\))?)?(?(rule) =+)$"
)
_TIMED = re.compile(r" in [0-9]+(?:\.[0-9]+)?s(?: \([0-9:]+\))?(?: =+)?$")
_ITEM = re.compile(r"^([0-9]{1,9}) ([a-z]+)$")
# pytest's words for each count; the ones T25 does not keep (warnings, reruns) are known.
_WORDS = {
    "passed": "passed",
    "failed": "failed",
    "skipped": "skipped",
    "deselected": "deselected",
    "xfailed": "xfailed",
    "xpassed": "xpassed",
    "error": "errors",
    "errors": "errors",
}
_IGNORED = {"warning", "warnings", "rerun", "reruns", "subtests"}


def names_pytest(argv: Sequence[str]) -> bool:
    """Whether the check runs pytest: an argument naming it (`pytest`, `.venv/bin/pytest`,
    `python -m pytest`, `uv run pytest`)."""
    return any(PurePosixPath(arg).name in ("pytest", "py.test") for arg in argv)


def pytest_summary(output: str) -> Figures | None:
    """The figures of pytest's final summary line in `output`, or None."""
    lines = output[-SUMMARY_LINES * MAX_LINE :].splitlines()[-SUMMARY_LINES:]
    for line in reversed(lines):
        found = _summary_line(_ANSI.sub("", line).strip()) if len(line) <= MAX_LINE else None
        if found is not None:
            return found
    return None


def _summary_line(line: str) -> Figures | None:
    """One line, when it is a pytest summary: with its rules (`===`) or its duration."""
    m = _SUMMARY.match(line)
    if m is None or not (m["rule"] or _TIMED.search(line)):
        return None
    body = m["body"].strip()
    if body == "no tests ran":
        return Figures(source="pytest")
    counts: dict[str, int] = {}
    for item in body.split(", "):
        part = _ITEM.match(item)
        if part is None:
            return None
        n, word = int(part[1]), part[2]
        if word in _IGNORED:
            continue
        kind = _WORDS.get(word)
        if kind is None or kind in counts or n > MAX_COUNT:
            return None
        counts[kind] = n
    return Figures(source="pytest", **counts) if counts else None


# -- JUnit XML ------------------------------------------------------------------------------


def junit_path(check: QACheck) -> str | None:
    """Where the check writes its JUnit XML report, relative to the tree: its `junit` key,
    else pytest's `--junitxml=PATH` (or `--junit-xml`) in its argv, when PATH is relative."""
    if check.junit is not None:
        return check.junit
    argv = check.run
    for i, arg in enumerate(argv):
        name, eq, value = arg.partition("=")
        if name not in ("--junitxml", "--junit-xml"):
            continue
        path = value if eq else (argv[i + 1] if i + 1 < len(argv) else "")
        parts = PurePosixPath(path).parts
        if path and not PurePosixPath(path).is_absolute() and ".." not in parts:
            return path
    return None


@dataclass(frozen=True)
class Before:
    """The report's file as it was before the check ran: none, or its identity."""

    tree: Path
    relative: str
    path: Path | None  # None: not a path T25 reads (outside the tree)
    existed: bool
    identity: tuple[int, int, int, int] | None


def before(tree: Path, relative: str) -> Before:
    """Note the report's file before the check runs: one already there that the check does
    not write again is not the check's report, and is not removed."""
    path = _inside(tree, relative)
    if path is None:
        return Before(tree, relative, None, False, None)
    try:
        found = os.lstat(path)
    except OSError:
        return Before(tree, relative, path, False, None)
    return Before(tree, relative, path, True, _identity(found))


def junit_report(noted: Before) -> Figures | None:
    """The figures of the report the check wrote, and the report removed when the check
    made it (a tree with untracked files is never cleaned up); None when there is none, or
    it is not a JUnit XML report T25 can read."""
    path = noted.path
    if path is None or _inside(noted.tree, noted.relative) != path:  # moved meanwhile
        return None
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC)
    except OSError:
        return None
    try:
        found = os.fstat(fd)
        if not stat.S_ISREG(found.st_mode) or _identity(found) == noted.identity:
            return None  # not a file, or the one that was there already
        if not noted.existed:
            with contextlib.suppress(OSError):
                os.unlink(path)
        return junit_figures(_chunks(fd))
    finally:
        os.close(fd)


def _chunks(fd: int) -> list[bytes]:
    """The file's bytes in chunks, at most MAX_XML_BYTES + 1 of them (over: too big)."""
    out, left = [], MAX_XML_BYTES + 1
    while left > 0 and (chunk := os.read(fd, min(left, 1 << 20))):
        out.append(chunk)
        left -= len(chunk)
    return out


def junit_figures(chunks: Sequence[bytes]) -> Figures | None:
    """The figures of a JUnit XML report: each `testcase` counted by what it holds
    (`failure`, `error`, `skipped`, pytest's xfail as `skipped type="pytest.xfail"`, else
    passed). None for a document that is too big or too deep, not well formed, declares a
    document type, or is not a `testsuites` / `testsuite` report."""
    if sum(len(c) for c in chunks) > MAX_XML_BYTES:
        return None
    tally = _Tally()
    parser = expat.ParserCreate()
    parser.SetParamEntityParsing(expat.XML_PARAM_ENTITY_PARSING_NEVER)
    parser.StartDoctypeDeclHandler = _refuse
    parser.EntityDeclHandler = _refuse
    parser.ExternalEntityRefHandler = _refuse
    parser.StartElementHandler = tally.start
    parser.EndElementHandler = tally.end
    try:
        for chunk in chunks:
            parser.Parse(chunk, False)
        parser.Parse(b"", True)
    except (expat.ExpatError, _Refused, ValueError, RecursionError, MemoryError):
        return None
    return tally.figures()


class _Refused(Exception):
    """A document type, an entity: what a test report never needs."""


def _refuse(*_: object) -> Never:
    raise _Refused


class _Tally:
    """Counts testcases as the parser meets them; the stack holds the open elements."""

    def __init__(self) -> None:
        self.stack: list[str] = []
        self.root: str | None = None
        self.case: set[str] = set()
        self.counts = dict.fromkeys(
            ("passed", "failed", "skipped", "xfailed", "xpassed", "errors"), 0
        )

    def start(self, name: str, attrs: dict[str, str]) -> None:
        if self.root is None:
            self.root = name
        if self.stack and self.stack[-1] == "testcase" and name in ("failure", "error"):
            self.case.add(name)
        elif self.stack and self.stack[-1] == "testcase" and name == "skipped":
            self.case.add("xfail" if attrs.get("type") == "pytest.xfail" else "skipped")
        elif name == "testcase":
            self.case = set()
        self.stack.append(name)
        if len(self.stack) > MAX_DEPTH:
            raise _Refused

    def end(self, name: str) -> None:
        self.stack.pop()
        if name != "testcase":
            return
        case = self.case
        if "failure" in case:
            self.counts["failed"] += 1
        if "error" in case:
            self.counts["errors"] += 1
        if not case & {"failure", "error"}:
            kind = "xfailed" if "xfail" in case else "skipped" if "skipped" in case else "passed"
            self.counts[kind] += 1
        if max(self.counts.values()) > MAX_COUNT:
            raise ValueError("more tests than a suite holds")

    def figures(self) -> Figures | None:
        if self.root not in ("testsuites", "testsuite"):
            return None
        return Figures(source="junit", **self.counts)


def _inside(tree: Path, relative: str) -> Path | None:
    """`relative` under `tree`, its directories resolved, when it stays inside the tree."""
    try:
        root = tree.resolve()
        path = (root / relative).parent.resolve() / PurePosixPath(relative).name
    except (OSError, RuntimeError, ValueError):
        return None
    return path if path.is_relative_to(root) and path != root else None


def _identity(found: os.stat_result) -> tuple[int, int, int, int]:
    return (found.st_dev, found.st_ino, found.st_mtime_ns, found.st_size)
