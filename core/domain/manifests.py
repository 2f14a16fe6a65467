"""Dependency manifests: which files declare a project's dependencies, and what they declare.

A task's change is held to a budget of new dependencies (`limits.max_new_dependencies`). The
worker sends the manifests the change touches as they were on the default branch and as they
are on the task branch (`ManifestChange`); `added_dependencies` reads both and names what the
change adds. Pure: text in, names out, so each kind is tested on its own.

    is_manifest(path)                 -> does T25 read dependencies from this file?
    declared(path, text)              -> the dependency names the file declares
    added_dependencies(changes)       -> "path: name" for each dependency a change adds

The kinds read: `*requirements*.txt` (one requirement a line), `pyproject.toml` (PEP 621
`dependencies` and `optional-dependencies`, PEP 735 `dependency-groups`, Poetry's
dependency tables), `package.json` (`dependencies`, `devDependencies`,
`peerDependencies`, `optionalDependencies`), `Cargo.toml` (`[dependencies]`,
`[dev-dependencies]`, `[build-dependencies]`, the workspace's and each target's), `go.mod`
(direct `require`s; `// indirect` ones are what the direct ones pull in) and `Gemfile`
(`gem` lines). Names are compared as each ecosystem does: Python's normalised (PEP 503),
the others as written. A file that does not parse declares nothing.
"""

from __future__ import annotations

import re
import tomllib
from collections.abc import Iterable, Iterator, Mapping
from fnmatch import fnmatchcase
from typing import Any

from pydantic import BaseModel, ConfigDict

from core.domain import agent_json

MANIFEST_NAMES = (
    "*requirements*.txt",
    "pyproject.toml",
    "package.json",
    "Cargo.toml",
    "go.mod",
    "Gemfile",
)
MAX_MANIFEST_CHARS = 1_000_000  # a bigger manifest is not sent, and counts as unread


class ManifestChange(BaseModel):
    """One manifest a change touches: its text on the default branch and on the task
    branch (None: the file did not exist there, or could not be read as text)."""

    model_config = ConfigDict(frozen=True, extra="forbid", defer_build=True)

    path: str
    before: str | None = None
    after: str | None = None


def is_manifest(path: str) -> bool:
    name = path.rsplit("/", 1)[-1]
    return any(fnmatchcase(name, pattern) for pattern in MANIFEST_NAMES)


def added_dependencies(changes: Iterable[ManifestChange]) -> tuple[str, ...]:
    """Each dependency the changes add, as `path: name` (the first manifest, by path, that
    declares it), in path then name order. A name is new to its ecosystem: one that any of
    the changed manifests of its kind declared before is not, so a renamed manifest, or a
    dependency moved from requirements.txt to pyproject.toml, adds nothing."""
    changes = sorted(changes, key=lambda c: c.path)
    before: dict[str, set[str]] = {}
    for change in changes:
        before.setdefault(_ecosystem(change.path), set()).update(
            declared(change.path, change.before or "")
        )
    added = []
    for change in changes:
        known = before[_ecosystem(change.path)]
        new = declared(change.path, change.after or "") - known
        added += [f"{change.path}: {name}" for name in sorted(new)]
        known |= new
    return tuple(added)


def _ecosystem(path: str) -> str:
    name = path.rsplit("/", 1)[-1]
    return "python" if name == "pyproject.toml" or name.startswith("requirements") else name


def declared(path: str, text: str) -> set[str]:
    """The dependency names `text`, read as the manifest `path` names, declares."""
    name = path.rsplit("/", 1)[-1]
    if not text.strip():
        return set()
    if fnmatchcase(name, "*requirements*.txt"):
        return set(_requirements(text))
    if name == "package.json":
        return _package_json(text)
    if name == "go.mod":
        return set(_go_mod(text))
    if name == "Gemfile":
        return set(_GEM.findall(text))
    try:  # an agent wrote it: a table nested without end is no manifest
        data = tomllib.loads(text)
    except (tomllib.TOMLDecodeError, RecursionError, MemoryError):
        return set()
    if name == "pyproject.toml":
        return set(_pyproject(data))
    if name == "Cargo.toml":
        return set(_cargo(data))
    return set()


# -- Python --------------------------------------------------------------------------------------

_PEP508_NAME = re.compile(r"\s*([A-Za-z0-9](?:[A-Za-z0-9._-]*[A-Za-z0-9])?)")


def _python_name(requirement: str) -> str | None:
    found = _PEP508_NAME.match(requirement)
    return re.sub(r"[-_.]+", "-", found[1]).lower() if found else None


def _requirements(text: str) -> Iterator[str]:
    for raw in text.splitlines():
        line = raw.split(" #", 1)[0].strip()
        if not line or line.startswith(("#", "-")):  # comments, -r other.txt, -e ., --index-url
            continue
        if (name := _python_name(line)) is not None:
            yield name


def _pyproject(data: Mapping[str, Any]) -> Iterator[str]:
    project = _table(data.get("project"))
    lists: list[Any] = [project.get("dependencies")]
    lists += _table(project.get("optional-dependencies")).values()
    lists += _table(data.get("dependency-groups")).values()
    for items in lists:
        for item in items if isinstance(items, list) else []:
            if isinstance(item, str) and (name := _python_name(item)) is not None:
                yield name
    poetry = _table(_table(data.get("tool")).get("poetry"))
    tables = [poetry.get("dependencies"), poetry.get("dev-dependencies")]
    tables += [_table(g).get("dependencies") for g in _table(poetry.get("group")).values()]
    for table in tables:
        for key in _table(table):
            if key.lower() != "python" and (name := _python_name(key)) is not None:
                yield name


# -- the others ------------------------------------------------------------------------------------

_NPM_FIELDS = ("dependencies", "devDependencies", "peerDependencies", "optionalDependencies")
_CARGO_TABLES = ("dependencies", "dev-dependencies", "build-dependencies")
_GEM = re.compile(r"""^[ \t]*gem[ \t(]+["']([^"']+)["']""", re.MULTILINE)


def _package_json(text: str) -> set[str]:
    try:
        data = agent_json.loads(text)
    except ValueError:  # not JSON, or too deep or too long to be a manifest
        return set()
    if not isinstance(data, dict):
        return set()
    return {name for field in _NPM_FIELDS for name in _table(data.get(field))}


def _cargo(data: Mapping[str, Any]) -> Iterator[str]:
    scopes = [data, *_table(data.get("target")).values()]
    for scope in scopes:
        for table in _CARGO_TABLES:
            yield from _table(_table(scope).get(table))
    yield from _table(_table(data.get("workspace")).get("dependencies"))


def _go_mod(text: str) -> Iterator[str]:
    block = False
    for raw in text.splitlines():
        line, _, comment = raw.partition("//")
        words = line.split()
        if block:
            if words[:1] == [")"]:
                block = False
            elif words and "indirect" not in comment:
                yield words[0]
        elif words[:1] == ["require"]:
            if words[1:2] == ["("]:
                block = True
            elif len(words) >= 3 and "indirect" not in comment:
                yield words[1]


def _table(value: Any) -> dict[str, Any]:
    return value if isinstance(value, dict) else {}
