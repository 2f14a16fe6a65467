"""A test module imports its helpers from tests/support/, never from another test module or a
conftest: a helper one test module offers another is moved to tests/support/, and a shared
fixture is a plugin of tests/conftest.py, used by name."""

from __future__ import annotations

import ast
from pathlib import Path

from tests.support import CHECKOUT

TESTS = CHECKOUT / "tests"


def imported_modules(path: Path) -> list[tuple[int, str]]:
    """Each `tests.…` module `path` imports, with its line."""
    found = []
    for node in ast.walk(ast.parse(path.read_text(), str(path))):
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
        for node in ast.walk(ast.parse(path.read_text(), str(path)))
        if isinstance(node, ast.ImportFrom) and node.level == 0 and node.module in local
    ]
    assert wrong == []
