"""Every wait in a test waits for a condition with a bounded deadline, never for time to pass
(tests/support/waiting.py): a sleep at statement level outside a loop is refused unless its
statement says why it is not a wait, in a comment of the form `# not a wait: WHY`, on one of
its lines or in the comment lines right above it. A sleep inside a loop is the step of a
poll; `pilot.pause()` without a delay waits until the app is idle; code a test starts as a
child program is a string here, not looked at."""

from __future__ import annotations

import ast
import io
import textwrap
import tokenize
from collections.abc import Iterator
from pathlib import Path

TESTS = Path(__file__).resolve().parents[1]
ALLOW = "# not a wait:"
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
    if not (isinstance(func, ast.Attribute) and isinstance(func.value, ast.Name)):
        return False
    if (func.value.id, func.attr) == ("pilot", "pause"):
        return bool(call.args or call.keywords)  # without a delay: until the app is idle
    return (func.value.id, func.attr) in SLEEPS


def bare_sleeps(tree: ast.AST, in_loop: bool = False) -> Iterator[ast.stmt]:
    """The sleeps that are statements of their own outside any loop of their function."""
    for node in ast.iter_child_nodes(tree):
        if isinstance(node, ast.Expr) and is_sleep(node.value) and not in_loop:
            yield node
        inner = False if isinstance(node, SCOPES) else in_loop or isinstance(node, LOOPS)
        yield from bare_sleeps(node, inner)


def comments(source: str) -> dict[int, str]:
    """Each line's comment, by line number."""
    return {
        token.start[0]: token.string
        for token in tokenize.generate_tokens(io.StringIO(source).readline)
        if token.type == tokenize.COMMENT
    }


def says_why(stmt: ast.stmt, lines: list[str], notes: dict[int, str]) -> bool:
    """Whether a comment on the statement's lines, or in the block of comment lines right
    above it, says it is not a wait."""
    said = set(range(stmt.lineno, (stmt.end_lineno or stmt.lineno) + 1))
    above = stmt.lineno - 1
    while above >= 1 and lines[above - 1].lstrip().startswith("#"):
        said.add(above)
        above -= 1
    return any(notes.get(n, "").startswith(ALLOW) for n in said)


def refused(source: str) -> list[int]:
    """The lines of `source` holding a bare sleep without its reason."""
    if "sleep" not in source and "pause" not in source:
        return []
    lines, notes = source.splitlines(), comments(source)
    return [
        stmt.lineno for stmt in bare_sleeps(ast.parse(source)) if not says_why(stmt, lines, notes)
    ]


def test_no_test_waits_for_time_to_pass():
    found = [
        f"{path.relative_to(TESTS.parent)}:{line}"
        for path in sorted(TESTS.rglob("*.py"))
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
            # not a wait: the scheduled moment of a race,
            # said over two lines
            await asyncio.sleep(0.2)
            await pilot.pause()
            await pilot.pause(0.1)
            code = "import time; time.sleep(300)"
            x = await asyncio.sleep(0, result=1)
            while True:
                def g():
                    time.sleep(2)
    """)
    assert refused(source) == [6, 7, 8, 18, 23]
