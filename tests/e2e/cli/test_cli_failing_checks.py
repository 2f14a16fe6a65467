"""`t25 task show` gives a failing check's last lines as text, one line each."""

from __future__ import annotations

import json
import sys

from tests.support.pipeline import PIPELINE_CONFIG

SCRIPT = (
    "print('collected 3 items'); print(); print('E       assert total(cart) == 30'); "
    "print('FAILED tests/test_pay.py::test_total - assert 29 == 30'); raise SystemExit(1)"
)


def test_task_show_prints_the_failing_checks_last_lines(t25, repo):
    assert t25("init").code == 0
    run = json.dumps([sys.executable, "-c", SCRIPT])
    (repo / "t25.yaml").write_text(
        PIPELINE_CONFIG
        + "limits: {max_qa_loops: 0}\n"
        + f"qa: {{checks: [{{name: unit, run: {run}}}]}}\n"
    )
    assert t25("task", "new", "Totals").code == 0
    ran = t25("run")
    assert ran.code == 0, ran.err
    shown = t25("task", "show", "T-1")
    assert shown.code == 0, shown.err
    lines = shown.out.splitlines()
    at = lines.index("failing  (the last lines of each)")
    assert lines[at + 1] == "  ✗ unit (exit 1)"
    assert "      E       assert total(cart) == 30" in lines[at + 2 :]
    assert "      FAILED tests/test_pay.py::test_total - assert 29 == 30" in lines[at + 2 :]
