"""Defaults that work on first try, with the real agent CLIs: `t25 init` on a machine with
one CLI writes roles its own `t25 doctor` passes, and a logged-out CLI (Claude Code with no
key, in a HOME of its own) falls to the next profile of its chain, recorded with the reason,
as a missing one does."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import yaml

from tests.support.pipeline import SCRIPTED, write_config
from tests.support.real_clis import BIN_DIR, need


def t25(cwd: Path, home: Path, path: str, *args: str, **env: str) -> subprocess.CompletedProcess:
    """The real binary with only `path`'s CLIs to find and nothing of the operator's login."""
    return subprocess.run(
        [sys.executable, "-m", "t25_tui", *args],
        cwd=cwd,
        env={"PATH": f"{path}:{Path(sys.executable).parent}:/usr/bin:/bin", "HOME": str(home)}
        | env,
        stdin=subprocess.DEVNULL,
        capture_output=True,
        text=True,
        timeout=300,
    )


def only(tmp_path: Path, *binaries: str) -> str:
    """A directory on PATH that holds these CLIs and no other."""
    where = tmp_path / "bin"
    where.mkdir()
    for name in binaries:
        (where / name).symlink_to(BIN_DIR / name)
    return str(where)


def test_init_with_claude_code_alone_passes_its_own_doctor(repo, tmp_path):
    need("claude")
    home = tmp_path / "home"
    home.mkdir()
    path = only(tmp_path, "claude")
    done = t25(repo, home, path, "init")
    assert done.returncode == 0, done.stderr
    assert "roles: claude (found on PATH)" in done.stdout
    roles = yaml.safe_load((repo / "t25.yaml").read_text())["roles"]
    assert {p["adapter"] for chain in roles.values() for p in chain} == {"claude"}
    assert roles["dev"] == [{"adapter": "claude", "model": "sonnet"}]
    assert roles["reviewer"] == [{"adapter": "claude", "model": "opus"}]
    # A key in the environment is a login; doctor then has nothing to say.
    doctor = t25(repo, home, path, "doctor", ANTHROPIC_API_KEY="dummy-key")
    assert doctor.returncode == 0, doctor.stdout + doctor.stderr
    assert "NEEDS_INPUT" not in doctor.stdout


def test_init_picks_the_clis_it_finds_and_reviews_by_another(repo, tmp_path):
    need("claude")
    need("codex")
    home = tmp_path / "home"
    home.mkdir()
    done = t25(repo, home, only(tmp_path, "codex", "claude"), "init")
    assert done.returncode == 0, done.stderr
    roles = yaml.safe_load((repo / "t25.yaml").read_text())["roles"]
    assert roles["dev"] == [{"adapter": "claude", "model": "sonnet"}, {"adapter": "codex"}]
    assert roles["reviewer"] == [{"adapter": "codex"}, {"adapter": "claude", "model": "opus"}]


def test_init_with_no_cli_says_so(repo, tmp_path):
    home = tmp_path / "home"
    home.mkdir()
    empty = tmp_path / "empty"
    empty.mkdir()
    done = t25(repo, home, str(empty), "init")
    assert done.returncode == 0, done.stderr
    assert "no agent CLI found on PATH" in done.stdout


def test_a_logged_out_claude_code_falls_to_the_next_profile(shop, tmp_path):
    need("claude")
    home = tmp_path / "home"
    home.mkdir()
    # dev: Claude Code first, in a HOME of its own with no key (logged out), then scripted.
    write_config(
        shop,
        roles={"dev": [{"adapter": "claude", "private_home": True}, SCRIPTED]},
    )
    env = {"IS_SANDBOX": "1", "T25_RUN_HOMES": str(tmp_path / "homes")}
    path = only(tmp_path, "claude")
    assert t25(shop, home, path, "task", "new", "Add a greeting", **env).returncode == 0
    done = t25(shop, home, path, "run", **env)
    assert done.returncode == 0, done.stdout + done.stderr
    shown = json.loads(t25(shop, home, path, "task", "show", "T-1", "--json", **env).stdout)
    assert shown["task"]["state"] == "DONE", shown
    dev = next(r for r in shown["runs"] if r["role"] == "dev")
    assert dev["adapter"] == "scripted"
    assert "claude: not logged in (Not logged in" in dev["adapter_reason"]
    assert "scripted for dev" in dev["adapter_reason"]


def test_a_logged_out_cli_with_no_other_fails_saying_so(shop, tmp_path):
    need("claude")
    home = tmp_path / "home"
    home.mkdir()
    write_config(shop, roles={"dev": [{"adapter": "claude", "private_home": True}]})
    env = {"IS_SANDBOX": "1", "T25_RUN_HOMES": str(tmp_path / "homes")}
    path = only(tmp_path, "claude")
    t25(shop, home, path, "task", "new", "Add a greeting", **env)
    t25(shop, home, path, "run", **env)
    shown = json.loads(t25(shop, home, path, "task", "show", "T-1", "--json", **env).stdout)
    assert shown["task"]["state"] == "FAILED", shown
    dev = next(r for r in shown["runs"] if r["role"] == "dev")
    assert "Not logged in" in json.dumps(dev)


def test_reviewer_differs_from_author_off_is_yaml_false(repo, tmp_path):
    """The documented `off` (YAML's false) and `false` are accepted and mean off."""
    home = tmp_path / "home"
    home.mkdir()
    for value in ("off", "false", "'off'"):
        (repo / "t25.yaml").write_text(
            f"projects: [{{name: app}}]\npolicies:\n  reviewer_differs_from_author: {value}\n"
        )
        done = t25(repo, home, "/nonexistent", "doctor", "--json")
        assert "reviewer_differs_from_author" not in done.stderr, done.stderr
        assert json.loads(done.stdout)["config"]["error"] is None, done.stdout
    (repo / "t25.yaml").write_text(
        "projects: [{name: app}]\npolicies:\n  reviewer_differs_from_author: true\n"
    )
    done = t25(repo, home, "/nonexistent", "doctor")
    assert "give model, adapter or off" in done.stdout + done.stderr
