"""The forge is the worker's, never an agent's: with the operator's GitHub login in the worker's
environment (GH_TOKEN, GITHUB_TOKEN, GH_ENTERPRISE_TOKEN) no agent CLI's environment holds it,
and no agent's network allowlist — its CLI's model endpoint and the configured allow_hosts —
lets it reach the forge's API, public though the forge is."""

from __future__ import annotations

import ipaddress
from pathlib import Path

import pytest

from adapters.base import CliAdapter
from adapters.registry import builtin_specs
from core.config.schema import SandboxConfig
from core.domain.agent import AgentRequest
from core.domain.models import TaskState
from core.domain.network import Allowlist

LOGIN = {
    "GH_TOKEN": "ghp_the_operators_own_login_0001",
    "GITHUB_TOKEN": "ghp_the_operators_own_login_0002",
    "GH_ENTERPRISE_TOKEN": "ghp_the_operators_own_login_0003",
}
GITHUB = [ipaddress.ip_address("140.82.112.6")]  # a public address, as api.github.com has


def _dev() -> AgentRequest:
    allow = SandboxConfig().allow_hosts  # the default allowlist a run adds to its model's
    return AgentRequest(
        task_id="T-1",
        run_id="R-1",
        role="dev",
        stage=TaskState.IMPLEMENTING,
        prompt="fix the failing check",
        cwd=Path("/tmp"),
        allow_hosts=tuple(allow),
    )


@pytest.mark.parametrize("spec", builtin_specs(), ids=lambda s: s.name)
def test_no_agent_holds_the_login_or_may_reach_the_forge(spec, monkeypatch):
    for name, value in LOGIN.items():
        monkeypatch.setenv(name, value)
    request = _dev()
    env = CliAdapter(spec).environment(request, None)
    assert not set(LOGIN) & set(env)
    assert not set(LOGIN.values()) & set(env.values())
    allowlist = Allowlist.of([*spec.model_hosts(env, request.args), *request.allow_hosts])
    for host in ("api.github.com", "github.com", "git.acme.example"):
        assert not allowlist.decide(host, 443, GITHUB).allowed, (spec.name, host)
