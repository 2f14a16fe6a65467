"""The README's first lines are the two commands, and CI runs the second one verbatim."""

from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def _commands() -> list[str]:
    lines = (ROOT / "README.md").read_text().splitlines()
    start = lines.index("```sh") + 1
    return lines[start:lines.index("```", start)]


def test_the_readme_opens_with_exactly_two_commands():
    head = (ROOT / "README.md").read_text().splitlines()[:6]
    assert head[2] == "```sh" and head[5] == "```"
    run, test = _commands()
    assert run.startswith("python3 -m venv .venv") and "t25 " in run
    assert test.startswith("python3 -m venv .venv") and "pytest" in test


def test_ci_runs_the_readmes_test_command():
    ci = (ROOT / ".ci" / "run").read_text().splitlines()
    assert _commands()[1] in ci
    assert "export T25_REQUIRE_PG=1" in ci
