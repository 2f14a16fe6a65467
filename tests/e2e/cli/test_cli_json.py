"""`--json` on the read commands: each output validates against its shape's JSON Schema
(t25_tui.cli.shapes), and says what the text says."""

from __future__ import annotations

from tests.support.pipeline import PIPELINE_CONFIG
from tests.support.shapes import UTC_TIME, conforms


def test_task_list_show_audit_and_cost_print_their_documented_shapes(t25, repo):
    assert t25("init").code == 0
    (repo / "t25.yaml").write_text(PIPELINE_CONFIG)
    assert t25("task", "new", "Greet", "--type", "fix").code == 0
    assert t25("task", "new", "Later \x1b[31mred", "--description", "scripted: risk=high").code == 1
    assert t25("task", "new", "Later", "--description", "scripted: risk=high").code == 0
    assert t25("run").code == 0
    assert t25("--actor", "ana", "cancel", "T-2", "--reason", "not now").code == 0

    unfinished = conforms("task-list", t25("task", "list", "--json").out)
    assert [t["id"] for t in unfinished["tasks"]] == ["T-1"]  # DONE, waiting for its merge
    assert unfinished["next"] is None and unfinished["finished"] == {"CANCELLED": 1}
    listed = conforms("task-list", t25("task", "list", "--all", "--json").out)
    assert [(t["id"], t["state"], t["branch"]) for t in listed["tasks"]] == [
        ("T-1", "DONE", "fix/T-1"),
        ("T-2", "CANCELLED", "feat/T-2"),
    ]
    assert listed["next"] is None and listed["finished"] == {}
    assert all(UTC_TIME.fullmatch(t["created_at"]) for t in listed["tasks"])
    only = conforms("task-list", t25("task", "list", "--state", "DONE", "--json").out)
    assert [t["id"] for t in only["tasks"]] == ["T-1"]
    empty = conforms(
        "task-list", t25("task", "list", "--project", "shop", "--state", "QA", "--json").out
    )
    assert empty == {"tasks": [], "next": None, "finished": {}}

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
    # tokens per stage beside dollars; each run's model requests as its CLI reported them
    by_stage = shown["cost"]["by_stage"]
    assert list(by_stage)[:3] == ["SPEC", "PLAN", "IMPLEMENTING"] and "DOCS" in by_stage
    agent_runs = [r for r in shown["runs"] if r["adapter"] == "scripted"]
    assert agent_runs and all(
        r["requests"] == [{**r["usage"], "model": r["model"]}] for r in agent_runs
    )
    dev = [r for r in agent_runs if r["stage"] == "IMPLEMENTING"]
    implementing = by_stage["IMPLEMENTING"]
    assert implementing["requests"] == len(dev) and implementing["runs"] == len(dev)
    assert (
        implementing["cached_input_tokens"] == sum(r["usage"]["cache_read_tokens"] for r in dev) > 0
    )
    assert implementing["input_tokens"] == sum(
        r["usage"]["input_tokens"] + r["usage"]["cache_write_tokens"] for r in dev
    )
    assert implementing["output_tokens"] == sum(r["usage"]["output_tokens"] for r in dev) > 0
    assert round(sum(s["usd"] for s in by_stage.values()), 6) == round(
        shown["cost"]["total_usd"], 6
    )
    shown_text = t25("task", "show", "1").out
    assert "tokens by stage" in shown_text
    (line,) = [ln for ln in shown_text.splitlines() if ln.strip().startswith("IMPLEMENTING ")]
    assert line.split()[1:4] == [
        str(implementing["requests"]),
        f"{implementing['input_tokens']:,}",
        f"{implementing['cached_input_tokens']:,}",
    ]

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
    assert set(cost["by_stage"]) >= {"SPEC", "PLAN"} and "tokens by stage" in text


def test_a_task_that_is_not_there_is_an_error_not_json(t25, repo):
    assert t25("init").code == 0
    done = t25("task", "show", "T-9", "--json")
    assert done.code == 1 and done.out == "" and "T-9" in done.err


def test_a_task_that_waits_shows_its_priority_what_it_waits_for_and_what_still_blocks_it(t25, repo):
    assert t25("init").code == 0
    assert t25("task", "new", "First").code == 0
    assert t25("task", "new", "Later", "--after", "T-1", "--priority", "4").code == 0
    listed = conforms("task-list", t25("task", "list", "--json").out)
    assert [(t["id"], t["priority"], t["after"]) for t in listed["tasks"]] == [
        ("T-1", 0, []),
        ("T-2", 4, ["T-1"]),
    ]
    later = conforms("task-show", t25("task", "show", "T-2", "--json").out)
    assert later["blockers"] == ["T-1"] and later["task"]["after"] == ["T-1"]
    first = conforms("task-show", t25("task", "show", "T-1", "--json").out)
    assert first["blockers"] == []
