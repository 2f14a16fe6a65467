"""Every wait in a test waits for a condition with a bounded deadline, never for time to pass
(tests/support/waiting.py): a sleep at statement level outside a loop is refused unless its
statement says why it is not a wait, in a comment of the form `# not a wait: WHY`, on one of
its lines or on the line above it. A sleep inside a loop is the step of a poll, and code a
test starts as a child program is a string here, not looked at."""

from __future__ import annotations

import ast
import io
import textwrap
import tokenize
from collections.abc import Iterator
from pathlib import Path

TESTS = Path(__file__).resolve().parents[1]
ALLOW = "# not a wait:"
# The cockpit's tests and their helper go through their own review of waits; until it is
# done they are not scanned.
NOT_YET_SCANNED = (TESTS / "e2e" / "tui", TESTS / "support" / "cockpit.py")
# (module or object name, function): the calls that pass time
SLEEPS = {
    ("time", "sleep"),
    ("asyncio", "sleep"),
    ("anyio", "sleep"),
    ("trio", "sleep"),
    ("pilot", "pause"),
}
LOOPS = (ast.For, ast.AsyncFor, ast.While)
SCOPES = (ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda, ast.ClassDef)


def is_sleep(call: ast.expr) -> bool:
    if isinstance(call, ast.Await):
        call = call.value
    if not isinstance(call, ast.Call):
        return False
    func = call.func
    if isinstance(func, ast.Name):
        return func.id == "sleep"  # `from time import sleep`
    return (
        isinstance(func, ast.Attribute)
        and isinstance(func.value, ast.Name)
        and (func.value.id, func.attr) in SLEEPS
    )


def bare_sleeps(tree: ast.AST, in_loop: bool = False) -> Iterator[ast.stmt]:
    """The sleeps that are statements of their own outside any loop of their function."""
    for node in ast.iter_child_nodes(tree):
        if isinstance(node, ast.Expr) and is_sleep(node.value) and not in_loop:
            yield node
        inner = False if isinstance(node, SCOPES) else in_loop or isinstance(node, LOOPS)
        yield from bare_sleeps(node, inner)


def allowed_lines(source: str) -> set[int]:
    """The lines whose comment says the sleep on them (or below) is not a wait."""
    return {
        token.start[0]
        for token in tokenize.generate_tokens(io.StringIO(source).readline)
        if token.type == tokenize.COMMENT and token.string.startswith(ALLOW)
    }


def refused(source: str) -> list[int]:
    """The lines of `source` holding a bare sleep without its reason."""
    if "sleep" not in source and "pause" not in source:
        return []
    allowed = allowed_lines(source)
    return [
        stmt.lineno
        for stmt in bare_sleeps(ast.parse(source))
        if not allowed & set(range(stmt.lineno - 1, (stmt.end_lineno or stmt.lineno) + 1))
    ]


def scanned() -> Iterator[Path]:
    for path in sorted(TESTS.rglob("*.py")):
        if not any(path.is_relative_to(skip) for skip in NOT_YET_SCANNED):
            yield path


def test_no_test_waits_for_time_to_pass():
    found = [
        f"{path.relative_to(TESTS.parent)}:{line}"
        for path in scanned()
        for line in refused(path.read_text())
    ]
    assert not found, (
        "a fixed sleep waits for time to pass: wait for the condition instead (an event, a "
        "file, a log line, a process state, a store row; tests/support/waiting.py), or say "
        f"why it is not a wait with `{ALLOW} ...`:\n  " + "\n  ".join(found)
    )


def test_the_scan_tells_a_fixed_sleep_from_a_poll_and_a_reasoned_pause():
    source = textwrap.dedent("""
        import asyncio, time
        from time import sleep

        async def f(ready):
            await asyncio.sleep(0.1)
            time.sleep(1)
            sleep(1)
            while not ready():
                await asyncio.sleep(0.05)
            for _ in range(3):
                time.sleep(0.1)
            await asyncio.sleep(3)  # not a wait: the outage itself
            # not a wait: the scheduled moment of a race
            await asyncio.sleep(0.2)
            code = "import time; time.sleep(300)"
            x = await asyncio.sleep(0, result=1)
            while True:
                def g():
                    time.sleep(2)
    """)
    assert refused(source) == [6, 7, 8, 20]
