"""`t25 doctor`, run as the real command line."""

from __future__ import annotations

import yaml


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
    done = t25("doctor")
    assert done.code == 0, done.out + done.err
    assert "scripted" in done.out and "plays: scripted" in done.out
    assert "NO USABLE ADAPTER" not in done.out


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
    done = t25("doctor", env={"PATH": "/nonexistent-bin:/usr/bin:/bin"})
    assert done.code == 1
    assert "dev" in done.out and "NO USABLE ADAPTER" in done.out
    assert "nosuch: no such adapter" in done.out
    assert "env_passthrough T25_TEST_UNSET_VAR is not set" in done.out
    assert "sandbox docker" in done.out
