"""`t25 doctor`, run as the real command line."""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from tests.support.shapes import conforms


def write(repo, roles) -> None:
    (repo / "t25.yaml").write_text(yaml.safe_dump({"projects": [{"name": "app"}], "roles": roles}))


def test_doctor_reports_each_adapter_and_passes_when_every_role_can_run(repo, t25):
    write(
        repo,
        {
            role: [{"adapter": "scripted"}]
            for role in ("spec", "planner", "dev", "qa", "reviewer", "docs")
        },
    )
    done = t25("doctor", "--verbose")
    assert done.code == 0, done.out + done.err
    assert "scripted" in done.out and "plays: scripted" in done.out
    assert "NO USABLE ADAPTER" not in done.out
    assert "roles.reviewer: no profile differs from what dev's scripted writes" in done.out


def test_doctor_is_content_with_a_reviewer_on_another_model_or_the_rule_off(repo, t25):
    roles = {role: [{"adapter": "scripted"}] for role in ("spec", "planner", "dev", "qa", "docs")}
    roles["reviewer"] = [{"adapter": "scripted", "model": "scripted-2"}]
    write(repo, roles)
    assert "problems: none" in t25("doctor", "--verbose").out
    (repo / "t25.yaml").write_text(
        yaml.safe_dump(
            {
                "projects": [{"name": "app"}],
                "roles": roles,
                "policies": {"reviewer_differs_from_author": "adapter"},
            }
        )
    )
    assert "add a profile with another adapter to roles.reviewer" in t25("doctor", "--verbose").out


def test_doctor_fails_when_a_role_has_no_usable_adapter_and_says_what_is_wrong(repo, t25):
    roles = {
        role: [{"adapter": "scripted"}] for role in ("spec", "planner", "qa", "reviewer", "docs")
    }
    roles["dev"] = [
        {"adapter": "nosuch"},
        {
            "adapter": "scripted",
            "env_passthrough": ["T25_TEST_UNSET_VAR"],
            "sandbox": "docker",
            "sandbox_image": "t25/agent:1",
        },
    ]
    write(repo, roles)
    done = t25("doctor", "--verbose", env={"PATH": "/nonexistent-bin:/usr/bin:/bin"})
    assert done.code == 1
    assert "dev" in done.out and "NO USABLE ADAPTER" in done.out
    assert "nosuch: no such adapter" in done.out
    assert "env_passthrough T25_TEST_UNSET_VAR is not set" in done.out
    assert "sandbox docker" in done.out


def test_doctor_reports_every_row_role_and_problem_in_order(repo):
    """The whole report, line by line (spacing aside): a known CLI that is not installed,
    two names T25 does not ship, the scripted agent behind an unusable sandbox, and the
    problems in the order the adapters and then the profiles are met."""
    write(
        repo,
        {
            "spec": [{"adapter": "claude", "private_home": True}, {"adapter": "scripted"}],
            "planner": [{"adapter": "nosuch"}],
            "dev": [
                {
                    "adapter": "scripted",
                    "env_passthrough": ["T25_TEST_UNSET_VAR"],
                    "sandbox": "docker",
                    "sandbox_image": "t25/agent:1",
                }
            ],
            "qa": [{"adapter": "scripted"}],
            "reviewer": [{"adapter": "clade"}, {"adapter": "scripted"}],
            "docs": [{"adapter": "scripted"}],
        },
    )
    scripted = Path(sys.executable).with_name("t25-scripted-agent")
    # An environment of its own: no login of the operator's may hide a problem.
    env = {"PATH": f"{scripted.parent}:/usr/bin:/bin", "HOME": str(repo)}
    done = subprocess.run(
        [sys.executable, "-m", "t25_tui", "doctor", "--verbose"],
        cwd=repo,
        env=env,
        stdin=subprocess.DEVNULL,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == 1, done.stderr
    known = "aider, claude, codex, gemini, opencode, scripted"
    claude_caps = (
        "stream-json yes yes --resume SESSION_ID --dangerously-skip-permissions "
        "--setting-sources user --strict-mcp-config"
    )
    claude_flags = "--strict-mcp-config --exclude-dynamic-system-prompt-sections"
    claude_env = (
        "CLAUDE_CODE_DISABLE_AUTO_MEMORY=1 CLAUDE_CODE_DISABLE_GIT_INSTRUCTIONS=1 "
        "CLAUDE_CODE_DISABLE_BACKGROUND_TASKS=1"
    )
    # Spacing aside: the columns are as wide as the widest cell, the path included.
    everything = [" ".join(line.split()) for line in done.stdout.splitlines()]
    # The wall around runs (tests/e2e/cli/test_doctor_wall.py), then the tools and the adapters.
    at = next(i for i, line in enumerate(everything) if line.startswith("git: "))
    wall, lines = everything[2:at], everything[:2] + everything[at:]
    assert wall[0].startswith("sandbox probe (as ") and "what a hostile agent gets here:" in wall
    assert set(lines[7]) == {"-", " "}
    assert lines[2].startswith("git: ") and lines[3].startswith("bubblewrap: ")
    assert lines[:2] + lines[4:7] + lines[8:] == [
        f"t25 doctor: {repo / 't25.yaml'}",
        "sandbox: auto - bubblewrap confines every agent and QA check; network allowlist",
        f"store: sqlite:///{repo / '.factory' / 't25.db'}",
        "",
        "adapter found version supported output usage cost resume sandbox flags later stages login",
        f"claude no - no {claude_caps} not checked (not installed)",
        f"scripted {scripted} 0.1.0 yes no no no --resume SESSION_ID none reads none not needed",
        "nosuch - - - - - - - - - -",
        "clade - - - - - - - - - -",
        "",
        "roles:",
        "spec claude -> scripted plays: scripted",
        "planner nosuch NO USABLE ADAPTER",
        "dev scripted NO USABLE ADAPTER",
        "qa scripted plays: scripted",
        "reviewer clade -> scripted plays: scripted",
        "docs scripted plays: scripted",
        "",
        "tools (what each role's CLI may offer its model, and the flags that say so):",
        "spec read, search",
        f"claude --tools Read,Grep,Glob {claude_flags}; env {claude_env}",
        "scripted (no flags)",
        "planner read, search",
        "nosuch (no such adapter)",
        "dev read, search, edit, shell",
        "scripted (no flags)",
        "qa read, search",
        "scripted (no flags)",
        "reviewer read, search",
        "clade (no such adapter)",
        "scripted (no flags)",
        "docs read, search, edit",
        "scripted (no flags)",
        "",
        "each request resends (its system prompt and tool schemas):",
        (
            "claude (its default model): 27.6 KB under T25, 108.6 KB with its own defaults, as "
            "measured on claude-sonnet-4-5; its system prompt depends on the model: 6 KB to "
            "27 KB with its defaults, 3 KB to 13 KB under T25"
        ),
        "",
        "problems:",
        "- claude: `claude` not found on PATH",
        f"- nosuch: no such adapter (known: {known})",
        f"- clade: no such adapter (known: {known}); did you mean 'claude'?",
        (
            "- roles.spec[0] (claude): private_home hides the login in your HOME and none of "
            "ANTHROPIC_API_KEY, ANTHROPIC_AUTH_TOKEN, CLAUDE_CODE_OAUTH_TOKEN is set"
        ),
        "- roles.dev[0] (scripted): env_passthrough T25_TEST_UNSET_VAR is not set here",
        "- roles.dev[0] (scripted): sandbox docker: the docker CLI is not installed",
    ]


def test_doctor_shows_each_projects_own_policy_and_checks_its_own_roles(repo, t25):
    roles = {role: [{"adapter": "scripted"}] for role in ("spec", "planner", "dev", "qa", "docs")}
    roles["reviewer"] = [{"adapter": "scripted", "model": "scripted-2"}]
    project = {
        "name": "app",
        "roles": {"dev": [{"adapter": "nosuch"}]},
        "limits": {"max_diff_lines": 5000},
    }
    (repo / "t25.yaml").write_text(yaml.safe_dump({"projects": [project], "roles": roles}))
    done = t25("doctor", "--verbose")
    assert done.code == 1, done.out  # the project's own dev chain cannot run
    assert (
        "project app, in place of the above: roles.dev nosuch; limits.max_diff_lines 5000"
        in done.out
    )
    lines = done.out.splitlines()
    at = lines.index(
        "  project app, in place of the above: roles.dev nosuch; limits.max_diff_lines 5000"
    )
    assert lines[at + 1].split()[:2] == ["dev", "nosuch"] and "NO USABLE ADAPTER" in lines[at + 1]
    assert "nosuch: no such adapter" in done.out


def test_a_typo_in_t25_yaml_is_named_with_its_line_and_the_rest_is_still_checked(repo, t25):
    (repo / "t25.yaml").write_text("projects:\n  - name: app\nlimits:\n  max_dif_lines: 10\n")
    done = t25("doctor", "--verbose")
    assert done.code == 1
    wrong = "t25.yaml:4: limits.max_dif_lines: unknown key"
    assert done.out.startswith(f"t25 doctor: {wrong}")
    assert "did you mean 'max_diff_lines'?" in done.out
    assert "git: " in done.out and "roles:" in done.out  # the rest, checked all the same
    report = conforms("doctor", t25("doctor", "--json").out)
    assert report["config"]["error"].startswith(wrong) and not report["ok"]
    assert report["problems"][0].startswith(wrong)


def _with_store(repo, url: str) -> None:
    roles = {role: [{"adapter": "scripted"}] for role in ("spec", "planner", "dev", "qa", "docs")}
    roles["reviewer"] = [{"adapter": "scripted", "model": "scripted-2"}]
    (repo / "t25.yaml").write_text(
        yaml.safe_dump({"projects": [{"name": "app"}], "roles": roles, "store": {"url": url}})
    )


def test_a_postgres_store_that_answers_is_reachable(repo, t25):
    dsn = os.environ.get("T25_TEST_PG_DSN", "postgresql://postgres@127.0.0.1:5432/postgres")
    _with_store(repo, dsn)
    done = t25("doctor", "--json")
    report = conforms("doctor", done.out)
    if not report["store"]["reachable"] and os.environ.get("T25_REQUIRE_PG") != "1":
        pytest.skip(f"no Postgres at {dsn}: {report['store']['problem']}")
    assert report["store"] == {"url": dsn, "reachable": True, "problem": None}
    assert done.code == 0, report["problems"]
    assert f"store: {dsn} reachable" in t25("doctor", "--verbose").out


def test_a_postgres_store_that_does_not_answer_fails_the_doctor(repo, t25):
    with socket.socket() as free:  # a port nothing listens on
        free.bind(("127.0.0.1", 0))
        port = free.getsockname()[1]
    _with_store(repo, f"postgresql://postgres@127.0.0.1:{port}/t25")
    done = t25("doctor", "--verbose")
    assert done.code == 1
    assert f"store: postgresql://postgres@127.0.0.1:{port}/t25 UNREACHABLE" in done.out
    assert "problems: none" not in done.out


def test_the_json_report_has_its_documented_shape(repo, t25):
    roles = {role: [{"adapter": "scripted"}] for role in ("spec", "planner", "dev", "qa", "docs")}
    roles["reviewer"] = [{"adapter": "scripted", "model": "scripted-2"}]
    project = {"name": "app", "roles": {"dev": [{"adapter": "nosuch"}]}}
    (repo / "t25.yaml").write_text(yaml.safe_dump({"projects": [project], "roles": roles}))
    done = t25("doctor", "--json")
    report = conforms("doctor", done.out)
    assert done.code == 1 and report["ok"] is False
    assert report["config"] == {"path": str(repo / "t25.yaml"), "found": True, "error": None}
    assert {"role": "dev", "project": "app", "chain": ["nosuch"], "plays": None} in report["roles"]
    assert {"role": "dev", "project": None, "chain": ["scripted"], "plays": "scripted"} in (
        report["roles"]
    )
    assert report["projects"] == [{"name": "app", "overrides": ["roles.dev nosuch"]}]
    scripted = next(a for a in report["adapters"] if a["name"] == "scripted")
    assert scripted["login"] == {"state": "not needed", "by": ""}


def test_the_json_report_maps_each_roles_tool_set_onto_each_cli_of_its_chain(repo, t25):
    roles = {role: [{"adapter": "scripted"}] for role in ("spec", "planner", "qa", "docs")}
    roles["dev"] = [{"adapter": "claude"}, {"adapter": "codex", "tools": "cli"}]
    roles["reviewer"] = [{"adapter": "codex"}, {"adapter": "gemini", "tools": ["read"]}]
    project = {"name": "app", "roles": {"docs": [{"adapter": "opencode"}]}}
    (repo / "t25.yaml").write_text(yaml.safe_dump({"projects": [project], "roles": roles}))
    report = conforms("doctor", t25("doctor", "--json").out)
    tools = {(m["project"], m["role"], m["adapter"]): m for m in report["tools"]}

    dev = tools[None, "dev", "claude"]
    assert dev["tools"] == ["read", "search", "edit", "shell"]
    assert dev["args"][:2] == ["--tools", "Read,Grep,Glob,Write,Edit,Bash"]
    assert dev["env"]["CLAUDE_CODE_DISABLE_AUTO_MEMORY"] == "1"
    # `tools: cli`: the CLI's own tools; Codex keeps the sandbox T25 always gives it.
    assert tools[None, "dev", "codex"]["tools"] is None
    assert tools[None, "dev", "codex"]["args"] == ["--sandbox", "workspace-write"]
    assert tools[None, "reviewer", "codex"]["args"][:2] == ["--sandbox", "read-only"]
    gemini = tools[None, "reviewer", "gemini"]
    assert gemini["tools"] == ["read"]
    assert [Path(a).name for a in gemini["args"][1::2]] == ["deny-all.toml", "read.toml"]
    docs = tools["app", "docs", "opencode"]
    assert json.loads(docs["env"]["OPENCODE_PERMISSION"]) == {
        "*": "deny", "read": "allow", "list": "allow", "grep": "allow", "glob": "allow",
        "edit": "allow",
    }  # fmt: skip
    assert tools[None, "spec", "scripted"]["args"] == []
    codex = next(a for a in report["adapters"] if a["name"] == "codex")
    assert "a read-only worktree in T25's bubblewrap" in codex["capabilities"]["tools"]

    # What each configured CLI resends with every request, as measured (bench/tokens.py).
    costs = {c["adapter"]: c for c in report["requests"]}
    assert sorted(costs) == ["claude", "codex", "gemini", "opencode"]  # none for scripted
    assert costs["codex"]["model"] is None and costs["codex"]["measured_on"] == "gpt-5.5"
    assert costs["codex"]["t25_bytes"] <= costs["codex"]["defaults_bytes"] / 2
    assert "6 KB to 27 KB" in costs["claude"]["note"]

    text = t25("doctor", "--verbose").out
    assert "reviewer  read, search" in text
    assert "codex     --sandbox read-only --disable goals" in text
    assert "project app: docs read, search, edit" in text
    assert "codex (its default model): 4.2 KB under T25, 35.9 KB with its own defaults" in text
    assert "each request resends (its system prompt and tool schemas):" in t25("doctor").out
