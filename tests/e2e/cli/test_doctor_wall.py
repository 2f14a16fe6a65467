"""`t25 doctor` says what the wall around runs is on this machine, as configured: the sandbox
probe's view from inside, what each role's CLIs may reach (their model endpoints from their
own base-URL settings, and what t25.yaml adds), how resources are capped, and the
sandbox table of docs/guides/security.md with this machine's verdict in each row."""

from __future__ import annotations

import json
import os

import pytest
import yaml

from adapters.sandbox import bwrap_problem


def _doctor(t25, repo, config: dict, env: dict[str, str] | None = None) -> dict:
    (repo / "t25.yaml").write_text(yaml.safe_dump({"projects": [{"name": "app"}], **config}))
    done = t25("doctor", "--json", env=env)
    return json.loads(done.out)["wall"]


def _verdicts(wall: dict) -> dict[str, str]:
    return {row["attack"]: row["verdict"] for row in wall["verdicts"]}


@pytest.mark.skipif(bool(bwrap_problem()), reason=f"bubblewrap cannot run here: {bwrap_problem()}")
def test_the_doctor_lists_what_each_role_may_reach_and_the_verdicts(t25, repo):
    sandbox = {"allow_hosts": ["pypi.org"], "by_role": {"dev": {"allow_hosts": ["*.npmjs.org"]}}}
    roles = {"dev": [{"adapter": "claude"}], "reviewer": [{"adapter": "codex"}]}
    env = {**os.environ, "ANTHROPIC_BASE_URL": "http://127.0.0.1:9911/"}
    wall = _doctor(t25, repo, {"sandbox": sandbox, "roles": roles}, env)
    reach = {(r["role"], r["adapter"]): r["hosts"] for r in wall["reach"]}
    assert reach["dev", "claude"] == ["127.0.0.1:9911", "pypi.org", "*.npmjs.org"]
    assert reach["reviewer", "codex"] == ["api.openai.com", "chatgpt.com", "pypi.org"]
    assert "capabilities inside: none; a mount: refused" in wall["probe"]
    assert wall["network"] == "allowlist" and wall["qa_network"] == "none"
    verdicts = _verdicts(wall)
    assert verdicts["reach loopback services (Postgres, t25 serve)"] == "refused (own network)"
    assert verdicts["remount the host read-write (as root)"] == "refused (no capability)"
    assert verdicts["reach the internet"] == "only the allowlist (proxy)"


@pytest.mark.parametrize(
    ("sandbox", "loopback"),
    [({"network": "shared"}, "open"), ({"mode": "none"}, "open (unconfined)")],
)
def test_the_doctor_says_what_a_weaker_choice_exposes(t25, repo, sandbox, loopback):
    wall = _doctor(t25, repo, {"sandbox": sandbox})
    assert _verdicts(wall)["reach loopback services (Postgres, t25 serve)"] == loopback
