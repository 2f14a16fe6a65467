"""adapters.registry is the only list of the agent CLIs, and each CLI's adapter
(adapters/<cli>.py) holds what T25 knows of it: the files it reads from a project's tree
are protected by default, its events are rendered and its output read only through the
registry, and nothing else names the CLIs as a list."""

from __future__ import annotations

import ast
import json
import tomllib
from collections.abc import Iterator

import pytest

from adapters import registry, transcript
from adapters.base import CliAdapterSpec
from adapters.entries import Entry, EventShapes, Kind
from adapters.parsing import JsonObject
from core.config.agent_files import AGENT_CLI_FILES
from core.config.policy_config import Policies
from core.control.policies import protected_touched
from tests.support import CHECKOUT

ROOT = CHECKOUT
PACKAGES = ("core", "adapters", "store", "t25_tui")
CLI_MODULES = {f"adapters.{name}" for name in registry.BUILTIN_NAMES}
# What every CLI shares: none of these defines anything named after one CLI.
SHARED = ("base", "parsing", "entries", "transcript", "login", "process", "registry")


def _examples(pattern: str) -> list[str]:
    """Paths a change could touch that `pattern` is meant to name: a file under a directory
    pattern; a name at the root and deep in the tree for a name without a slash."""
    if pattern.endswith("/**"):
        return [pattern.removesuffix("**") + "settings.json"]
    return [pattern, f"src/deep/{pattern}"]


@pytest.mark.parametrize("spec", registry.builtin_specs(), ids=lambda spec: spec.name)
def test_a_change_to_any_file_a_registered_cli_reads_is_protected_by_default(spec):
    protected = Policies().protected
    for pattern in spec.project_files:
        for path in _examples(pattern):
            assert protected_touched([path], protected) == (path,), (spec.name, path)


def test_the_cores_list_of_agent_cli_files_is_the_union_of_what_each_adapter_declares():
    union = tuple(dict.fromkeys(f for s in registry.builtin_specs() for f in s.project_files))
    assert union == AGENT_CLI_FILES, f"core/config/agent_files.py should read {union}"
    Policies(protected_paths=list(union))  # each one a valid pattern


class _Seen(CliAdapterSpec):
    """A CLI of this test's own, whose renderer says which event it saw."""

    name, binary = "seen", "seen"

    @staticmethod
    def _render(event: JsonObject) -> Iterator[Entry]:
        yield Entry(Kind.MESSAGE, f"seen {event.get('type')}")

    transcript = EventShapes(_render)


@pytest.fixture
def registered(monkeypatch: pytest.MonkeyPatch) -> Iterator[list[CliAdapterSpec]]:
    """The registry's specs, as this test sets them."""
    specs: list[CliAdapterSpec] = []
    monkeypatch.setattr(registry, "builtin_specs", lambda: specs)
    transcript.registered_shapes.cache_clear()
    yield specs
    transcript.registered_shapes.cache_clear()  # the real registry's, from the next read


def test_the_transcript_renders_an_event_only_by_a_registered_clis_renderer(registered):
    claude_init = json.dumps({"type": "system", "subtype": "init", "model": "m", "tools": []})
    (unknown,) = transcript.render_line(claude_init)
    assert unknown.kind is Kind.INFO and unknown.text.startswith("{")  # no renderer is built in
    registered.append(_Seen())
    transcript.registered_shapes.cache_clear()
    assert transcript.render_line(claude_init) == [Entry(Kind.MESSAGE, "seen system")]


def test_each_cli_is_parsed_and_rendered_by_its_own_adapter_from_the_registry():
    specs = registry.builtin_specs()
    assert all(type(s).parse is not CliAdapterSpec.parse for s in specs)  # each reads its own
    assert {type(s).__module__ for s in specs} == CLI_MODULES
    shapes = transcript.registered_shapes()
    assert shapes == tuple(s.transcript for s in specs if s.transcript)


def _modules() -> Iterator[tuple[str, ast.Module]]:
    """Every product module: its dotted name and its syntax tree."""
    for package in PACKAGES:
        for path in sorted((ROOT / package).rglob("*.py")):
            name = ".".join(path.relative_to(ROOT).with_suffix("").parts)
            yield name.removesuffix(".__init__"), ast.parse(path.read_text(encoding="utf-8"))


def _imported(tree: ast.Module) -> set[str]:
    found: set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            found |= {alias.name for alias in node.names}
        elif isinstance(node, ast.ImportFrom) and node.module:
            found |= {node.module, *(f"{node.module}.{a.name}" for a in node.names)}
    return found


def test_only_the_registry_imports_a_clis_adapter():
    importers = {name for name, tree in _modules() if _imported(tree) & CLI_MODULES}
    assert importers == {"adapters.registry"}


def test_every_clis_module_is_in_the_independence_contract():
    contracts = tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["importlinter"]
    independent = [c["modules"] for c in contracts["contracts"] if c["type"] == "independence"]
    assert sorted(CLI_MODULES) in [sorted(modules) for modules in independent]


def test_nothing_but_the_registry_lists_the_clis():
    names = set(registry.BUILTIN_NAMES)
    lists = []
    for module, tree in _modules():
        for node in ast.walk(tree):
            items = node.keys if isinstance(node, ast.Dict) else getattr(node, "elts", None)
            if module == "adapters.registry" or not isinstance(
                node, ast.Tuple | ast.List | ast.Set | ast.Dict
            ):
                continue
            named = {i.value for i in items or () if isinstance(i, ast.Constant)} & names
            if len(named) > 1:
                lists.append(f"{module}:{node.lineno} {sorted(named)}")
    assert lists == []


def test_what_every_cli_shares_defines_nothing_named_after_one():
    shared = {f"adapters.{name}" for name in SHARED}
    found = [
        f"{module}.{node.name}"
        for module, tree in _modules()
        if module in shared
        for node in ast.walk(tree)
        if isinstance(node, ast.FunctionDef | ast.ClassDef)
        and any(cli in node.name.lower() for cli in registry.BUILTIN_NAMES)
    ]
    assert found == []
