"""The real `t25` command line, run as a child process against real repos and stores."""

from __future__ import annotations

import json
import sqlite3
from pathlib import Path

from core.workspace.git import git_sync
from tests.support.pipeline import PIPELINE_CONFIG


def test_help_lists_every_command_with_a_purpose(t25):
    out = t25("--help").out
    for command in ("init", "demo", "task", "cancel", "retry", "archive", "audit"):
        line = next(line for line in out.splitlines() if line.strip().startswith(command + " "))
        assert len(line.split()) > 1, line


def test_init_writes_config_factory_dir_and_git_exclude(t25, repo):
    done = t25("init")
    assert done.code == 0, done.err
    assert (repo / "t25.yaml").is_file()
    assert (repo / ".factory").is_dir()
    assert "/.factory/" in (repo / ".git" / "info" / "exclude").read_text().splitlines()
    assert git_sync("status", "--porcelain", cwd=repo) == "?? t25.yaml"


def test_a_second_init_is_refused_and_changes_nothing(t25, repo):
    assert t25("init").code == 0
    before = (repo / "t25.yaml").read_bytes()
    again = t25("init")
    assert again.code == 1
    assert again.err.startswith("t25: error:") and "already" in again.err
    assert "Traceback" not in again.err
    assert (repo / "t25.yaml").read_bytes() == before
    exclude = (repo / ".git" / "info" / "exclude").read_text().splitlines()
    assert exclude.count("/.factory/") == 1


def test_init_outside_a_repository_says_what_to_do(t25, tmp_path):
    outside = tmp_path / "plain"
    outside.mkdir()
    done = t25("init", cwd=outside)
    assert done.code == 1 and "git init" in done.err


def test_task_lifecycle_through_the_command_line(t25, repo):
    assert t25("init").code == 0
    new = t25("task", "new", "Add rate limiting", "--type", "fix", "--description", "5/min")
    assert new.code == 0, new.err
    assert new.out.split()[:3] == ["T-1", "RECEIVED", "fix/T-1"]
    assert t25("task", "new", "Second").code == 0

    listed = t25("task", "list").out
    assert "T-1" in listed and "Second" in listed
    assert "T-1" not in t25("task", "list", "--state", "CANCELLED").out

    cancel = t25("--actor", "ana", "cancel", "1", "--reason", "not now")
    assert cancel.code == 0, cancel.err
    assert "CANCELLED" in cancel.out
    assert "T-1" in t25("task", "list", "--state", "cancelled").out

    refused = t25("retry", "T-1")
    assert refused.code == 1 and "only a FAILED task can be retried" in refused.err

    assert t25("--actor", "ana", "archive", "T-1").code == 0
    assert "T-1" not in t25("task", "list").out
    assert "(archived)" in t25("task", "list", "--all").out

    show = t25("task", "show", "T-1")
    assert show.code == 0, show.err
    assert "(claimed ana)  — not now" in show.out
    assert "cost     $0.0000" in show.out

    audit = t25("audit").out.splitlines()
    assert [line.split()[3] for line in audit] == ["cancel", "archive"]
    assert t25("audit", "--task", "T-2").out.startswith("no decisions recorded")
    verify = t25("audit", "verify")
    assert verify.code == 0 and verify.out.startswith("ok:")


def test_the_default_actor_is_the_os_user_with_the_git_identity(t25, repo):
    t25("init")
    t25("task", "new", "x")
    t25("cancel", "T-1")
    entry = json.loads((repo / ".factory" / "audit.jsonl").read_text().splitlines()[0])
    assert "Test Operator <operator@t25.invalid>" in entry["actor"]


def test_audit_verify_names_the_tampered_line(t25, repo):
    t25("init")
    for n in (1, 2, 3):
        t25("task", "new", f"task {n}")
        t25("cancel", f"T-{n}")
    path = repo / ".factory" / "audit.jsonl"
    lines = path.read_text().splitlines()
    lines[1] = lines[1].replace('"cancel"', '"approve"')
    path.write_text("\n".join(lines) + "\n")
    done = t25("audit", "verify")
    assert done.code == 1 and "line 2" in done.err


def test_unknown_ids_and_bad_ids_get_one_line_errors(t25):
    t25("init")
    for args in (("task", "show", "T-99"), ("cancel", "nonsense"), ("task", "show", "R-1")):
        done = t25(*args)
        assert done.code == 1, args
        assert done.err.startswith("t25: error:") and "Traceback" not in done.err
        assert "hint:" in done.err


def test_a_broken_config_names_file_line_and_key(t25, repo):
    t25("init")
    path = repo / "t25.yaml"
    path.write_text(path.read_text() + "\nlimitz: {}\n")
    done = t25("task", "list")
    assert done.code == 1 and "Traceback" not in done.err
    assert "t25.yaml:" in done.err and "limitz" in done.err


def test_a_store_that_is_not_t25s_is_refused_untouched(t25, repo):
    t25("init")
    db = repo / ".factory" / "t25.db"
    for suffix in ("-wal", "-shm"):
        Path(f"{db}{suffix}").unlink(missing_ok=True)
    db.unlink()
    con = sqlite3.connect(db)
    con.execute("CREATE TABLE notes(body TEXT)")
    con.commit()
    con.close()
    before = db.read_bytes()
    done = t25("task", "list")
    assert done.code == 1 and "not a T25 database" in done.err
    assert db.read_bytes() == before


def test_debug_shows_the_traceback(t25):
    done = t25("--debug", "task", "list")
    assert done.code != 0 and "Traceback" in done.err


def test_help_is_quick_because_it_imports_nothing_heavy(t25):
    # Behaviour, not timing: `--help` must not import pydantic, the store or textual.
    import subprocess
    import sys

    code = (
        "import sys; from t25_tui.cli.main import main\n"
        "try:\n    main(['--help'])\nexcept SystemExit:\n    pass\n"
        "print(sorted(m for m in ('pydantic', 'yaml', 'textual', 'aiosqlite') if m in sys.modules))"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True).stdout
    assert out.strip().endswith("[]")


def test_demo_runs_the_whole_pipeline_and_keeps_the_repository_when_asked(t25, tmp_path):
    where = tmp_path / "demo"
    # Three tasks through the whole pipeline: 120 s were not enough on a loaded machine.
    done = t25("demo", "--dir", str(where), cwd=tmp_path, timeout_s=400)
    assert done.code == 0, done.err
    out = done.out
    assert "T-2  PLAN → AWAITING_APPROVAL" in out
    assert "T-3  REVIEW → IMPLEMENTING  (changes requested: 1 major)" in out
    assert "T-2 cannot be merged: T-2 is in AWAITING_APPROVAL; a merge needs DONE" in done.err
    for n in (1, 2, 3):
        assert f"T-{n}  DONE  merged" in out
    assert "ok: " in out and "4 entries, chain intact" in out
    assert out.rstrip().endswith(f"The demo repository is kept at {where}.")
    log = git_sync("log", "--format=%s", "trunk", cwd=where)
    assert log.count("Merge ") == 3


def test_run_approve_reject_answer_merge_and_logs_from_the_command_line(t25, repo):
    assert t25("init").code == 0
    (repo / "t25.yaml").write_text(PIPELINE_CONFIG)
    t25("task", "new", "Risky", "--description", "scripted: risk=high")
    t25("task", "new", "Curious", "--description", "scripted: question=Which endpoint?")
    ran = t25("run")
    assert ran.code == 0, ran.err
    assert "T-1  needs approval: high-risk plan" in ran.out
    assert "T-2  asks: Which endpoint?" in ran.out
    assert "waiting for a human:" in ran.out and "t25 approve T-1" in ran.out

    assert t25("merge", "T-1").code == 1
    assert "reason" in t25("reject", "T-1").err  # --reason is required
    rejected = t25("reject", "T-1", "--reason", "smaller steps")
    assert rejected.code == 0 and "T-1  PLAN" in rejected.out and "next: t25 run" in rejected.out
    refused = t25("answer", "T-1", "x")
    assert refused.code == 1 and "only a task in NEEDS_INPUT can be answered" in refused.err
    assert t25("answer", "T-2", "The login endpoint").code == 0
    t25("run")
    assert t25("approve", "T-1", "--comment", "ok").code == 0
    assert t25("run").code == 0
    assert "DONE" in t25("task", "list", "--state", "DONE").out

    merged = t25("merge", "T-1")
    assert merged.code == 0, merged.err
    assert "T-1  DONE  merged" in merged.out and "worktree: removed" in merged.out

    logs = t25("logs", "T-2", "--raw")
    assert logs.code == 0 and '"type": "result"' in logs.out and "── R-" in logs.out
    first_run = logs.out.split("── ")[1].split()[0]
    one = t25("logs", first_run, "--raw")
    assert one.code == 0 and '"subtype": "init"' in one.out
    readable = t25("logs", first_run)
    assert readable.code == 0 and readable.out.startswith("· session started")
    assert t25("logs", "R-999").code == 1
    decisions = [line.split()[3] for line in t25("audit").out.splitlines()]
    assert decisions == ["reject", "answer", "approve", "merge"]


def test_a_merge_touching_protected_paths_names_each_from_the_command_line(t25, repo):
    assert t25("init").code == 0
    (repo / "t25.yaml").write_text(PIPELINE_CONFIG)
    t25("task", "new", "Bump", "--description", "scripted: touch=package.json,web app/go.mod")
    assert t25("run").code == 0
    shown = t25("task", "show", "T-1").out
    assert "protected paths touched (policies.protected_paths): 2" in shown
    command = "t25 merge T-1 --allow-path package.json --allow-path 'web app/go.mod'"
    assert f"merge    names each: {command}" in shown

    refused = t25("merge", "T-1", "--allow-path", "package.json")
    assert refused.code == 1
    assert "does not name: web app/go.mod" in refused.err and command in refused.err
    merged = t25("merge", "T-1", "--allow-path", "package.json", "--allow-path", "web app/go.mod")
    assert merged.code == 0, merged.err
    assert "T-1  DONE  merged" in merged.out
    assert "protected paths: package.json, web app/go.mod" in t25("audit").out


def test_a_review_only_the_author_could_play_asks_and_task_show_says_why(t25, repo):
    assert t25("init").code == 0
    same = PIPELINE_CONFIG.replace(
        "reviewer: [{adapter: scripted, model: scripted-2}]", "reviewer: [{adapter: scripted}]"
    )
    (repo / "t25.yaml").write_text(same)
    assert "roles.reviewer: no profile differs" in t25("doctor").out
    t25("task", "new", "Greeting")
    ran = t25("run")
    assert ran.code == 0, ran.err
    assert "T-1  asks: no agent of roles.reviewer differs from the author" in ran.out
    shown = t25("task", "show", "T-1").out
    assert (
        "adapter: scripted: wrote the change (policies.reviewer_differs_from_author: model)"
        in shown
    )
    (repo / "t25.yaml").write_text(same + "policies: {reviewer_differs_from_author: 'off'}\n")
    assert t25("answer", "T-1", "the same model may review").code == 0
    assert t25("run").code == 0
    assert "T-1" in t25("task", "list", "--state", "DONE").out


def test_logs_follow_streams_until_the_task_needs_a_human(t25, repo):
    import subprocess
    import sys

    assert t25("init").code == 0
    (repo / "t25.yaml").write_text(
        PIPELINE_CONFIG.replace(
            "dev: [{adapter: scripted}]",
            "dev: [{adapter: scripted, args: [--misbehave, 'slow:1']}]",
        )
    )
    t25("task", "new", "Slow one")
    runner = subprocess.Popen(
        [sys.executable, "-m", "t25_tui", "run"],
        cwd=repo,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    try:
        followed = t25("logs", "T-1", "--follow")
    finally:
        runner.wait(timeout=60)
    assert followed.code == 0, followed.err
    assert followed.out.count("· finished: ") == 6  # spec, plan, dev, qa, review, docs
    assert "DONE" in t25("task", "list", "--state", "DONE").out


def test_approve_binds_to_the_plan_named_and_refuses_another(t25, repo):
    assert t25("init").code == 0
    (repo / "t25.yaml").write_text(PIPELINE_CONFIG)
    t25("task", "new", "Risky", "--description", "scripted: risk=high")
    assert t25("run").code == 0
    malformed = t25("approve", "T-1", "--plan", "abc")
    assert malformed.code == 1 and "--plan: expected the plan's SHA-256" in malformed.err
    stale = t25("approve", "T-1", "--plan", "0" * 64)
    assert stale.code == 1, stale.err
    assert f"changed since it was shown (sha256:{'0' * 64}); it is now sha256:" in stale.err
    assert "high risk: " in stale.err  # the new plan's summary
    current = stale.err.split("it is now sha256:")[1][:64]
    approved = t25("approve", "T-1", "--plan", current)
    assert approved.code == 0, approved.err
    assert f"recorded on sha256:{current}" in approved.out
    assert [line.split()[3] for line in t25("audit").out.splitlines()] == ["approve"]
