"""Operators with names and roles, through a real `t25 serve`: tokens listed in the file
T25_OPERATOR_TOKENS names, each decision recorded under its token's name whatever the body
claims — one approver approves, another merges —, a viewer who may only read, an operator who
may not approve or merge."""

from __future__ import annotations

import hashlib
import os
import signal
import subprocess
import sys
from pathlib import Path

import httpx
import pytest

from core.errors import ConfigError
from core.workspace.git import git_sync
from t25_tui.api.operators import Operators
from tests.support.pipeline import write_config
from tests.support.waiting import answers, free_port, wait_until

CMD = [sys.executable, "-m", "t25_tui"]
TOKENS = {
    "ana": "ana-token-0123456789",
    "cy": "cy-token-0123456789",
    "bob": "bob-token-0123456789",
    "vic": "vic-token-01234",
}


def tokens_file(where: Path) -> Path:
    path = where / "operators"
    roles = {"ana": "approver", "cy": "approver", "bob": "operator", "vic": "viewer"}
    lines = ["# name role sha256 of the token"]
    lines += [
        f"{name} {roles[name]} sha256:{hashlib.sha256(token.encode()).hexdigest()}"
        for name, token in TOKENS.items()
    ]
    path.write_text("\n".join(lines) + "\n")
    return path


def as_(name: str) -> dict[str, str]:
    return {"Authorization": f"Bearer {TOKENS[name]}"}


def test_each_decision_is_recorded_under_its_tokens_name_and_roles_hold(shop, tmp_path):
    write_config(shop, roles={"planner": [{"adapter": "scripted"}]})
    port = free_port()
    env = {k: v for k, v in os.environ.items() if k != "T25_OPERATOR_TOKEN"}
    env["T25_OPERATOR_TOKENS"] = str(tokens_file(tmp_path))
    serve = subprocess.Popen(
        [*CMD, "serve", "--bind", f"127.0.0.1:{port}", "--workers", "1"],
        cwd=shop,
        env=env,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    url = f"http://127.0.0.1:{port}"
    try:
        wait_until(lambda: answers(url), timeout=60)
        with httpx.Client(base_url=url, timeout=10) as http:
            assert http.get("/tasks").status_code == 401  # no token
            assert http.get("/tasks", headers=as_("vic")).status_code == 200  # a viewer reads
            refused = http.post("/tasks", json={"title": "x"}, headers=as_("vic"))
            assert refused.status_code == 403 and "vic is a viewer" in refused.json()["error"]

            body = {"title": "Risky", "description": "scripted: risk=high", "actor": "mallory"}
            filed = http.post("/tasks", json=body, headers=as_("bob"))
            assert filed.status_code == 201, filed.text

            def waiting() -> bool:
                task = http.get("/tasks/T-1", headers=as_("vic")).json()["task"]
                return task["state"] == "AWAITING_APPROVAL"

            wait_until(waiting, timeout=90)
            refused = http.post("/tasks/T-1/approve", json={}, headers=as_("bob"))
            assert refused.status_code == 403 and "needs an approver" in refused.json()["error"]
            approved = http.post(
                "/tasks/T-1/approve", json={"actor": "mallory"}, headers=as_("ana")
            )
            assert approved.status_code == 200, approved.text

            def done() -> bool:
                task = http.get("/tasks/T-1", headers=as_("vic")).json()["task"]
                return task["state"] == "DONE"

            wait_until(done, timeout=120)
            refused = http.post("/tasks/T-1/merge", json={}, headers=as_("bob"))
            assert refused.status_code == 403 and "needs an approver" in refused.json()["error"]
            merged = http.post("/tasks/T-1/merge", json={"reason": "ship it"}, headers=as_("cy"))
            assert merged.status_code == 200, merged.text
            assert merged.json()["merged"] is True

            filed = http.post("/tasks", json={"title": "Later"}, headers=as_("bob"))
            assert filed.status_code == 201, filed.text
            cancelled = http.post(
                "/tasks/T-2/cancel", json={"reason": "not now"}, headers=as_("bob")
            )
            assert cancelled.status_code == 200, cancelled.text
            entries = http.get("/audit", headers=as_("vic")).json()
    finally:
        serve.send_signal(signal.SIGTERM)
        serve.wait(timeout=30)
    lines = entries["entries"] if isinstance(entries, dict) else entries
    # A cancel the pipeline overtook (T-2 leaving RECEIVED as it was cancelled) is voided by
    # T25 and ruled again: the log keeps both, and the decisions in effect are these.
    voided = {e["voids"] for e in lines if e["decision"] == "void"}
    assert all(e["actor"] == "t25" for e in lines if e["decision"] == "void")
    in_effect = [e for e in lines if e["decision"] != "void" and e["seq"] not in voided]
    assert [(e["actor"], e["decision"]) for e in in_effect] == [
        ("ana (claimed mallory)", "approve"),
        ("cy", "merge"),
        ("bob", "cancel"),
    ]
    assert "Merge feat/T-1" in git_sync("log", "-1", "--format=%s", "trunk", cwd=shop)


def test_a_broken_tokens_file_names_its_line(tmp_path):
    path = tmp_path / "operators"
    path.write_text("ana approver sha256:" + "0" * 64 + "\nbob boss sha256:" + "1" * 64 + "\n")
    with pytest.raises(ConfigError, match=r"operators:2: expected `NAME ROLE sha256:HEX`"):
        Operators.read(path)
    path.write_text("ana approver sha256:" + "0" * 64 + "\nana viewer sha256:" + "1" * 64 + "\n")
    with pytest.raises(ConfigError, match="listed twice"):
        Operators.read(path)
