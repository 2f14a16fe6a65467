"""The suite's shape: a test module lives in the folder of its kind, and imports its helpers
from tests/support/, never from another test module or a conftest: a helper one test module
offers another is moved to tests/support/, and a shared fixture is a plugin of
tests/conftest.py, used by name."""

from __future__ import annotations

import ast
from functools import cache
from pathlib import Path

from tests.support import CHECKOUT
from tests.support.kinds import KINDS, SLOW_FIXTURES, SLOW_KINDS

TESTS = CHECKOUT / "tests"


@cache
def parsed(path: Path) -> ast.Module:
    """A module's syntax tree, read once for every check here."""
    return ast.parse(path.read_text(), str(path))


def imported_modules(path: Path) -> list[tuple[int, str]]:
    """Each `tests.…` module `path` imports, with its line."""
    found = []
    for node in ast.walk(parsed(path)):
        if isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            names = [node.module]
        elif isinstance(node, ast.Import):
            names = [alias.name for alias in node.names]
        else:
            continue
        found += [(node.lineno, name) for name in names if name.split(".")[0] == "tests"]
    return found


def test_no_module_imports_a_test_module_or_a_conftest():
    wrong = [
        f"{path.relative_to(CHECKOUT)}:{line}: {name}"
        for path in sorted([*TESTS.rglob("*.py"), *(CHECKOUT / "bench").rglob("*.py")])
        for line, name in imported_modules(path)
        if name != "tests.support" and not name.startswith("tests.support.")
    ]
    assert wrong == [], "import these from tests/support/ instead:\n" + "\n".join(wrong)


def test_no_test_module_imports_another_without_the_package_path():
    """`from agent_kit import …` worked only while a test folder was on sys.path."""
    local = {path.stem for path in TESTS.rglob("*.py")} - {"__init__", "conftest"}
    wrong = [
        f"{path.relative_to(CHECKOUT)}:{node.lineno}: {node.module}"
        for path in sorted(TESTS.rglob("*.py"))
        for node in ast.walk(parsed(path))
        if isinstance(node, ast.ImportFrom) and node.level == 0 and node.module in local
    ]
    assert wrong == []


def test_each_test_module_lives_in_the_folder_of_its_kind():
    stray = [
        str(path.relative_to(CHECKOUT))
        for path in sorted(TESTS.rglob("test_*.py"))
        if path.relative_to(TESTS).parts[0] not in KINDS
    ]
    assert stray == [], f"move these into tests/{{{','.join(KINDS)}}}/"


def test_no_unit_or_contract_test_uses_a_fixture_that_starts_programs():
    wrong = [
        f"{path.relative_to(CHECKOUT)}:{node.lineno}: {node.name}"
        for kind in sorted(set(KINDS) - SLOW_KINDS)
        for path in sorted((TESTS / kind).rglob("test_*.py"))
        for node in ast.walk(parsed(path))
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef))
        and SLOW_FIXTURES.intersection(arg.arg for arg in node.args.args)
    ]
    assert wrong == [], "these start programs: move them to integration or e2e\n" + "\n".join(wrong)
