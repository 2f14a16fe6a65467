"""`--json` on the read commands: each output validates against its shape's JSON Schema
(t25_tui.cli.shapes), and says what the text says."""

from __future__ import annotations

from tests.shapes import UTC_TIME, conforms
from tests.test_cli import PIPELINE_CONFIG


def test_task_list_show_audit_and_cost_print_their_documented_shapes(t25, repo):
    assert t25("init").code == 0
    (repo / "t25.yaml").write_text(PIPELINE_CONFIG)
    assert t25("task", "new", "Greet", "--type", "fix").code == 0
    assert t25("task", "new", "Later \x1b[31mred", "--description", "scripted: risk=high").code == 1
    assert t25("task", "new", "Later", "--description", "scripted: risk=high").code == 0
    assert t25("run").code == 0
    assert t25("--actor", "ana", "cancel", "T-2", "--reason", "not now").code == 0

    listed = conforms("task-list", t25("task", "list", "--json").out)
    assert [(t["id"], t["state"], t["branch"]) for t in listed["tasks"]] == [
        ("T-1", "DONE", "fix/T-1"),
        ("T-2", "CANCELLED", "feat/T-2"),
    ]
    assert all(UTC_TIME.fullmatch(t["created_at"]) for t in listed["tasks"])
    only = conforms("task-list", t25("task", "list", "--state", "DONE", "--json").out)
    assert [t["id"] for t in only["tasks"]] == ["T-1"]
    empty = conforms(
        "task-list", t25("task", "list", "--project", "shop", "--state", "QA", "--json").out
    )
    assert empty == {"tasks": []}

    shown = conforms("task-show", t25("task", "show", "1", "--json").out)
    assert shown["task"]["id"] == "T-1" and shown["task"]["merged"] is False
    stages = [r["stage"] for r in shown["runs"]]
    assert stages[:3] == ["SPEC", "PLAN", "IMPLEMENTING"] and "REVIEW" in stages
    assert all(r["id"].startswith("R-") and r["status"] == "succeeded" for r in shown["runs"])
    moves = [
        (h["from_state"], h["to_state"]) for h in shown["history"] if h["kind"] == "transition"
    ]
    assert moves[0] == ("RECEIVED", "SPEC") and moves[-1][1] == "DONE"
    kinds = {a["kind"] for a in shown["artifacts"]}
    assert {"spec", "plan", "diff"} <= kinds and all(
        a["damaged"] is None for a in shown["artifacts"]
    )
    assert round(sum(r["cost_usd"] for r in shown["runs"]), 6) == round(
        shown["cost"]["total_usd"], 6
    )

    audit = conforms("audit", t25("audit", "--json").out)
    assert [(e["seq"], e["decision"], e["task"]) for e in audit["entries"]] == [
        (1, "cancel", "T-2")
    ]
    assert audit["entries"][0]["actor"].endswith("(claimed ana)")
    assert UTC_TIME.fullmatch(audit["entries"][0]["ts"])
    assert audit["chain"]["ok"] is True and audit["chain"]["lines"] == 1
    assert conforms("audit", t25("audit", "--task", "T-1", "--json").out)["entries"] == []

    cost = conforms("cost", t25("cost", "--json").out)
    assert set(cost["by_task"]) == {"T-1", "T-2"}  # T-2 ran its spec and plan
    assert cost["by_task"]["T-1"] == shown["cost"]["total_usd"]
    assert round(sum(cost["by_role"].values()), 6) == round(cost["total_usd"], 6)
    text = t25("cost").out
    assert text.startswith("total      $") and "by role" in text and "T-1 $" in text


def test_a_task_that_is_not_there_is_an_error_not_json(t25, repo):
    assert t25("init").code == 0
    done = t25("task", "show", "T-9", "--json")
    assert done.code == 1 and done.out == "" and "T-9" in done.err
