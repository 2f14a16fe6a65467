"""`t25 doctor` against the real agent CLIs, each logged out (HOME is an empty temp dir):
their own status commands are the probes, and a CLI that says "not logged in" is a problem
and exit 1, never "problems: none"."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import yaml

from tests.support.real_clis import BIN_DIR, SEARCH, need

SECRET = "sk-ant-doctor-must-never-print-this-0123456789"


def doctor(cwd: Path, home: Path, *args: str, **env: str) -> subprocess.CompletedProcess[str]:
    """The real binary, with the CLIs on PATH and nothing of the operator's login."""
    return subprocess.run(
        [sys.executable, "-m", "t25_tui", "doctor", *args],
        cwd=cwd,
        env={
            "PATH": f"{SEARCH}:{Path(sys.executable).parent}:/usr/bin:/bin",
            "HOME": str(home),
            **env,
        },
        stdin=subprocess.DEVNULL,
        capture_output=True,
        text=True,
        timeout=120,
    )


def configure(repo: Path, adapters: list[str]) -> None:
    roles = {role: [{"adapter": a} for a in adapters] for role in ("spec", "planner", "dev")}
    roles |= {role: [{"adapter": "scripted", "model": "s2"}] for role in ("qa", "reviewer", "docs")}
    (repo / "t25.yaml").write_text(yaml.safe_dump({"projects": [{"name": "app"}], "roles": roles}))


def logins(out: str) -> dict[str, dict[str, str]]:
    return {a["name"]: a["login"] for a in json.loads(out)["adapters"] if a["login"]}


def test_a_logged_out_claude_code_is_a_problem_and_exit_1(repo, tmp_path):
    need("claude")
    configure(repo, ["claude"])
    done = doctor(repo, tmp_path, "--verbose")  # the table's login column is in the wide view
    assert done.returncode == 1, done.stdout + done.stderr
    assert "problems: none" not in done.stdout
    assert "claude: not logged in (`claude auth status`): log in with `claude auth login`" in (
        done.stdout
    )
    row = next(line for line in done.stdout.splitlines() if line.startswith("claude "))
    assert row.endswith("no (`claude auth status`)")


def test_a_key_in_the_environment_is_a_login_and_is_never_printed(repo, tmp_path):
    need("claude")
    configure(repo, ["claude"])
    done = doctor(repo, tmp_path, "--json", ANTHROPIC_API_KEY=SECRET)
    assert logins(done.stdout)["claude"] == {"state": "yes", "by": "`claude auth status`"}
    assert done.returncode == 0, done.stdout
    text = doctor(repo, tmp_path, ANTHROPIC_API_KEY=SECRET)
    assert SECRET not in done.stdout + done.stderr + text.stdout + text.stderr
    assert "problems: none" in text.stdout


def test_every_cli_says_how_its_login_was_checked(repo, tmp_path):
    for binary in ("claude", "codex", "gemini", "opencode", "aider"):
        need(binary)
    configure(repo, ["claude", "codex", "gemini", "opencode", "aider"])
    done = doctor(repo, tmp_path, "--json")
    assert done.returncode == 1
    assert logins(done.stdout) == {
        "claude": {"state": "no", "by": "`claude auth status`"},
        "codex": {"state": "no", "by": "`codex login status`"},
        "gemini": {"state": "not checked", "by": "no probe"},
        "opencode": {"state": "no", "by": "`opencode auth list`"},
        "aider": {"state": "not checked", "by": "no probe"},
        "scripted": {"state": "not needed", "by": ""},
    }
    # A key the CLI reads counts where its probe does not look (Codex's status reads only
    # ~/.codex), and so does a credentials file.
    (tmp_path / ".gemini").mkdir(exist_ok=True)  # its --version made it
    (tmp_path / ".gemini" / "oauth_creds.json").write_text("{}")
    keyed = logins(doctor(repo, tmp_path, "--json", OPENAI_API_KEY="sk-x").stdout)
    assert keyed["codex"] == {"state": "yes", "by": "OPENAI_API_KEY is set"}
    assert keyed["aider"] == {"state": "yes", "by": "OPENAI_API_KEY is set"}
    assert keyed["gemini"] == {"state": "yes", "by": "~/.gemini/oauth_creds.json exists"}
    text = doctor(repo, tmp_path).stdout
    assert "not checked (no probe)" in text


def test_before_init_every_cli_is_checked_and_init_is_the_hint(tmp_path):
    need("claude")
    bare = tmp_path / "bare"
    bare.mkdir()
    subprocess.run(["git", "init", "-q"], cwd=bare, check=True)
    done = doctor(bare, tmp_path, "--json")
    report = json.loads(done.stdout)
    assert report["config"] == {"path": None, "found": False, "error": None}
    names = [a["name"] for a in report["adapters"]]
    assert names[:2] == ["claude", "codex"]  # the roles `t25 init` writes, then the rest
    assert set(names) == {"claude", "codex", "gemini", "opencode", "aider"}
    assert report["git"]["ok"] and report["git"]["version"]
    assert done.returncode == 1 and not report["ok"]  # claude plays every role, logged out
    text = doctor(bare, tmp_path).stdout
    assert text.startswith("t25 doctor: no t25.yaml here yet (hint: `t25 init` writes one)")
    assert not (bare / "t25.yaml").exists()


def test_a_cli_installed_off_path_is_found_and_named(repo, tmp_path):
    need("claude")
    tools = repo / ".tools" / "npm" / "node_modules" / ".bin"
    tools.mkdir(parents=True)
    (tools / "claude").symlink_to(BIN_DIR / "claude")
    configure(repo, ["claude"])
    done = subprocess.run(
        [sys.executable, "-m", "t25_tui", "doctor", "--json"],
        cwd=repo,
        env={"PATH": f"{Path(sys.executable).parent}:/usr/bin:/bin", "HOME": str(tmp_path)},
        capture_output=True,
        text=True,
        timeout=120,
    )
    claude = next(a for a in json.loads(done.stdout)["adapters"] if a["name"] == "claude")
    assert claude["path"] is None and claude["elsewhere"] == str(tools / "claude")
    assert (
        f"claude: `claude` not found on PATH (found {tools / 'claude'}: add {tools} to PATH)"
        in json.loads(done.stdout)["problems"]
    )
    assert os.path.islink(tools / "claude")
