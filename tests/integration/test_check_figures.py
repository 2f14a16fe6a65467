"""A check's test figures: read from what real pytest printed and wrote, compared with the
default branch's, and never believed (nor a crash) when what a check left is hostile."""

from __future__ import annotations

import asyncio
import os
import subprocess
import sys
import time
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from adapters.checks import run_check
from adapters.figures import (
    MAX_XML_BYTES,
    before,
    junit_figures,
    junit_path,
    junit_report,
    names_pytest,
    pytest_summary,
)
from core.config.policy_config import QACheck
from core.domain.agent import CheckSandbox
from core.domain.figures import Baseline, Figures, figures_line
from core.domain.models import CheckResult

SUITE = """\
import pytest


def test_one():
    pass


def test_two():
    pass


@pytest.mark.skip(reason="not today")
def test_skipped():
    pass


@pytest.mark.xfail(reason="known")
def test_xfailed():
    assert False


@pytest.mark.xfail(reason="fixed since")
def test_xpassed():
    pass


def test_failed():
    assert False


@pytest.fixture
def broken():
    raise RuntimeError("setup")


def test_error(broken):
    pass


def test_deselected():
    pass
"""

# What the suite's summary line says, in pytest's own words and order.
SAID = "1 failed, 2 passed, 1 skipped, 1 deselected, 1 xfailed, 1 xpassed, 1 error"
# The JUnit XML report has no xpassed (a non-strict xpass is a pass) and no deselected.
WRITTEN = Figures(source="junit", passed=3, failed=1, skipped=1, xfailed=1, errors=1)
PYTEST = [sys.executable, "-m", "pytest", "-p", "no:cacheprovider", "-k", "not deselected"]
# The child pytest loads no plugin this environment happens to have.
CHILD_ENV = {**os.environ, "PYTEST_DISABLE_PLUGIN_AUTOLOAD": "1"}


def real_pytest(where: Path, *args: str) -> str:
    done = subprocess.run(
        [*PYTEST, *args], cwd=where, capture_output=True, text=True, timeout=120, env=CHILD_ENV
    )
    assert done.returncode == 1, done.stdout + done.stderr  # one test failed
    return done.stdout


@pytest.fixture
def suite(tmp_path) -> Path:
    (tmp_path / "test_suite.py").write_text(SUITE)
    return tmp_path


# -- what real pytest prints and writes -------------------------------------------------------


@pytest.mark.parametrize("mode", [(), ("-q",), ("-rA", "-v")], ids=["default", "q", "verbose"])
def test_the_summary_line_real_pytest_prints_is_read(suite, mode):
    output = real_pytest(suite, *mode)
    figures = pytest_summary(output)
    assert figures == Figures(
        source="pytest",
        passed=2,
        failed=1,
        skipped=1,
        deselected=1,
        xfailed=1,
        xpassed=1,
        errors=1,
    )
    assert figures.summary() == SAID


def test_no_tests_and_collection_errors_as_real_pytest_reports_them(tmp_path):
    (tmp_path / "test_nothing.py").write_text("")
    done = subprocess.run(
        PYTEST, cwd=tmp_path, capture_output=True, text=True, timeout=120, env=CHILD_ENV
    )
    assert done.returncode == 5  # no tests ran
    assert pytest_summary(done.stdout) == Figures(source="pytest")
    assert pytest_summary(done.stdout).summary() == "no tests ran"

    (tmp_path / "test_broken.py").write_text("def test(:\n")
    (tmp_path / "test_also.py").write_text("import nowhere_to_be_found\n")
    done = subprocess.run(
        PYTEST, cwd=tmp_path, capture_output=True, text=True, timeout=120, env=CHILD_ENV
    )
    assert done.returncode == 2  # interrupted: errors during collection
    assert pytest_summary(done.stdout) == Figures(source="pytest", errors=2)


def test_the_junit_xml_report_real_pytest_writes_is_read(suite):
    real_pytest(suite, "--junitxml=reports/junit.xml")
    report = (suite / "reports" / "junit.xml").read_bytes()
    assert junit_figures([report]) == WRITTEN
    # read in any chunking, the same
    assert junit_figures([report[i : i + 7] for i in range(0, len(report), 7)]) == WRITTEN


async def test_a_check_carries_its_runners_figures_and_the_xml_report_wins(suite):
    """`--junitxml=` in the argv names the report; its figures win over the summary line,
    but for the deselected tests, which only the line holds; the report is removed."""
    check = QACheck(name="tests", run=[*PYTEST, "--junitxml=reports/junit.xml"])
    done = await run_check(check, suite, asyncio.Event(), CheckSandbox(kind="none"))
    assert not done.passed and done.exit_code == 1
    assert done.figures == WRITTEN.model_copy(update={"deselected": 1})
    assert not (suite / "reports" / "junit.xml").exists()

    summary_only = QACheck(name="tests", run=[*PYTEST, "-q"])
    done = await run_check(summary_only, suite, asyncio.Event(), CheckSandbox(kind="none"))
    assert done.figures is not None and done.figures.source == "pytest"
    assert done.figures.summary() == SAID


async def test_a_check_whose_runner_t25_does_not_know_has_no_figures(tmp_path):
    said = QACheck(name="lint", run=["sh", "-c", "echo '=== 3 passed in 0.1s ==='"])
    done = await run_check(said, tmp_path, asyncio.Event(), CheckSandbox(kind="none"))
    assert done.passed and done.figures is None  # not pytest: its line is not believed
    assert done.outcome(None) == "passed"


async def test_a_junit_key_names_the_report_of_any_runner(tmp_path):
    xml = '<testsuite tests="2"><testcase name="a"/><testcase name="b"><skipped/></testcase></testsuite>'
    check = QACheck(
        name="suite",
        run=["sh", "-c", f"mkdir -p out && echo '{xml}' > out/r.xml"],
        junit="out/r.xml",
    )
    done = await run_check(check, tmp_path, asyncio.Event(), CheckSandbox(kind="none"))
    assert done.figures == Figures(source="junit", passed=1, skipped=1)
    assert not (tmp_path / "out" / "r.xml").exists()


# -- what is compared, and how it reads -------------------------------------------------------


def test_figures_read_beside_the_default_branchs():
    now = Figures(source="pytest", passed=41, skipped=3, deselected=1)
    base = Baseline(
        branch="main",
        commit="c0ffee",
        task_id="T-1",
        figures={"tests": Figures(source="junit", passed=41, deselected=1)},
    )
    assert figures_line(now, "tests", base) == (
        "41 passed, 3 skipped, 1 deselected — 3 more skipped than on main"
    )
    assert figures_line(now, "tests", None) == "41 passed, 3 skipped, 1 deselected"
    assert figures_line(now, "lint", base) == "41 passed, 3 skipped, 1 deselected"
    fewer = Figures(source="pytest", passed=40, failed=1, deselected=1)
    assert figures_line(fewer, "tests", base) == (
        "1 failed, 40 passed, 1 deselected — 1 more failed, 1 fewer passed than on main"
    )
    same = base.figures["tests"]
    assert figures_line(same, "tests", base) == "41 passed, 1 deselected — as on main"
    result = CheckResult(name="tests", passed=True, figures=now)
    assert result.outcome(base) == (
        "passed (41 passed, 3 skipped, 1 deselected — 3 more skipped than on main)"
    )


def test_where_t25_knows_the_runner_and_its_report():
    assert names_pytest(["python", "-m", "pytest"])
    assert names_pytest([".venv/bin/pytest", "-q"])
    assert names_pytest(["uv", "run", "py.test"])
    assert not names_pytest(["make", "test"])
    assert not names_pytest(["sh", "-c", "pytest -q"])  # a shell line is not read
    assert junit_path(QACheck(name="t", run=["pytest", "--junitxml=r.xml"])) == "r.xml"
    assert junit_path(QACheck(name="t", run=["pytest", "--junit-xml", "o/r.xml"])) == "o/r.xml"
    assert junit_path(QACheck(name="t", run=["pytest", "--junitxml=/tmp/r.xml"])) is None
    assert junit_path(QACheck(name="t", run=["pytest", "--junitxml=../r.xml"])) is None
    assert junit_path(QACheck(name="t", run=["pytest", "--junitxml"])) is None
    keyed = QACheck(name="t", run=["make", "test"], junit="build/r.xml")
    assert junit_path(keyed) == "build/r.xml"
    for outside in ("/etc/r.xml", "../r.xml", "a/../../r.xml", "", "r\0.xml"):
        with pytest.raises(ValueError, match="inside the tree"):
            QACheck(name="t", run=["make"], junit=outside)


# -- hostile: no figures, never an exception ---------------------------------------------------

LAUGHS = b"""<?xml version="1.0"?>
<!DOCTYPE lolz [
 <!ENTITY lol "lol">
 <!ENTITY lol1 "&lol;&lol;&lol;&lol;&lol;&lol;&lol;&lol;&lol;&lol;">
 <!ENTITY lol2 "&lol1;&lol1;&lol1;&lol1;&lol1;&lol1;&lol1;&lol1;&lol1;&lol1;">
 <!ENTITY lol3 "&lol2;&lol2;&lol2;&lol2;&lol2;&lol2;&lol2;&lol2;&lol2;&lol2;">
 <!ENTITY lol4 "&lol3;&lol3;&lol3;&lol3;&lol3;&lol3;&lol3;&lol3;&lol3;&lol3;">
 <!ENTITY lol5 "&lol4;&lol4;&lol4;&lol4;&lol4;&lol4;&lol4;&lol4;&lol4;&lol4;">
 <!ENTITY lol6 "&lol5;&lol5;&lol5;&lol5;&lol5;&lol5;&lol5;&lol5;&lol5;&lol5;">
 <!ENTITY lol7 "&lol6;&lol6;&lol6;&lol6;&lol6;&lol6;&lol6;&lol6;&lol6;&lol6;">
 <!ENTITY lol8 "&lol7;&lol7;&lol7;&lol7;&lol7;&lol7;&lol7;&lol7;&lol7;&lol7;">
 <!ENTITY lol9 "&lol8;&lol8;&lol8;&lol8;&lol8;&lol8;&lol8;&lol8;&lol8;&lol8;">
]>
<testsuite><testcase name="&lol9;"/></testsuite>
"""
EXTERNAL = b"""<?xml version="1.0"?>
<!DOCTYPE t [<!ENTITY secret SYSTEM "file:///etc/passwd">]>
<testsuite><testcase name="&secret;"/></testsuite>
"""


@pytest.mark.parametrize(
    "document",
    [
        LAUGHS,
        EXTERNAL,
        b'<!DOCTYPE testsuite SYSTEM "http://127.0.0.1:9/junit.dtd"><testsuite/>',
        b"<testsuite><testcase>",  # not well formed
        b"<html><testcase/></html>",  # not a report
        b"",
        b"\xff\xfe\x00garbage",
        b"<testsuite>" + b"<a>" * 200_000 + b"</a>" * 200_000 + b"</testsuite>",
    ],
    ids=[
        "billion-laughs",
        "external-entity",
        "external-dtd",
        "unclosed",
        "html",
        "empty",
        "bytes",
        "deep",
    ],
)
def test_a_hostile_report_gives_no_figures(document):
    assert junit_figures([document]) is None


def test_a_report_over_the_bound_is_not_read(tmp_path):
    case = b'<testcase name="t"/>'
    huge = b"<testsuite>" + case * (MAX_XML_BYTES // len(case) + 1) + b"</testsuite>"
    assert junit_figures([huge]) is None
    (tmp_path / "r.xml").write_bytes(huge)
    assert junit_report(before(tmp_path / "elsewhere", "r.xml")) is None  # no such tree
    noted = before(tmp_path, "missing.xml")
    (tmp_path / "missing.xml").write_bytes(huge)
    assert junit_report(noted) is None


@pytest.mark.parametrize(
    "line",
    [
        "===== 99999999999 passed in 0.1s =====",  # more tests than a suite holds
        "===== 1 passed, 1 passed in 0.1s =====",
        "===== 3 frobbed in 0.1s =====",
        "===== -3 passed in 0.1s =====",
        "===== passed in 0.1s =====",
        "3 passed",  # no rules, no duration: any program's words
        "===== 3 passed in 0.1s" + " " * 1000 + "=====",
        "\x1b]52;c;ZWNobyBoaQ==\x07===== 3 passed in 0.1s =====",
    ],
)
def test_a_line_that_is_not_pytests_summary_gives_no_figures(line):
    assert pytest_summary(f"collected 3 items\n{line}\n") is None


def test_a_huge_output_is_read_in_its_last_lines_only():
    flood = "x" * (10 * 1024 * 1024)
    started = time.process_time()
    assert pytest_summary(flood) is None
    assert pytest_summary(flood + "\n= 3 passed in 0.1s =\n") == Figures(source="pytest", passed=3)
    assert pytest_summary("= 3 passed in 0.1s =\n" + "noise\n" * 100) is None  # not the last
    assert time.process_time() - started < 5  # a bound, not a benchmark: no quadratic scan


def test_a_report_the_check_did_not_write_is_neither_read_nor_removed(tmp_path):
    committed = tmp_path / "r.xml"
    committed.write_text('<testsuite><testcase name="old"/></testsuite>')
    noted = before(tmp_path, "r.xml")
    assert junit_report(noted) is None and committed.exists()  # as it was: not this run's

    outside = tmp_path.parent / f"{tmp_path.name}-outside.xml"
    outside.write_text('<testsuite><testcase name="x"/></testsuite>')
    tree = tmp_path / "tree"
    tree.mkdir()
    noted = before(tree, "r.xml")
    (tree / "r.xml").symlink_to(outside)
    assert junit_report(noted) is None and outside.exists()  # never through a symlink
    (tree / "out").symlink_to(tmp_path.parent)
    assert before(tree, "out/r.xml").path is None  # a directory leading out of the tree

    noted = before(tree, "fifo.xml")
    os.mkfifo(tree / "fifo.xml")
    assert junit_report(noted) is None  # not a file: not waited on


@settings(max_examples=300, deadline=None)
@given(st.text(max_size=2000))
def test_any_output_gives_figures_or_none(text):
    found = pytest_summary(text)
    assert found is None or isinstance(found, Figures)


@settings(max_examples=300, deadline=None)
@given(st.binary(max_size=2000) | st.text(max_size=500).map(lambda t: f"<testsuite>{t}".encode()))
def test_any_report_gives_figures_or_none(document):
    found = junit_figures([document])
    assert found is None or isinstance(found, Figures)
