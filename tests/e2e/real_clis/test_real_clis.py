"""Each real agent CLI through its T25 adapter, against the fake model server.

For every CLI: a whole T25 pipeline runs with the CLI playing the dev role (the other roles are
the scripted agent), the CLI really edits the worktree, its output parses, usage and cost are
recorded, and the proxy log shows nothing tried to leave the machine. An injected quota error
on the first adapter of a chain makes T25 fall back to the second; an overload is retried.
"""

from __future__ import annotations

import asyncio

import pytest

from adapters.registry import builtin_adapters
from core.domain.agent import AgentRequest, Failure
from core.domain.models import TaskState
from core.domain.network import Connection
from core.workspace.git import git_sync
from tests.support.real_clis import (
    CLIS,
    MODELS,
    assert_offline,
    need,
    profile,
    run_pipeline,
)


@pytest.mark.parametrize("cli", CLIS)
async def test_a_real_cli_plays_the_dev_stage_of_a_whole_pipeline(cli, fake, shop):
    need(cli)
    connections: list[Connection] = []
    task, dev, diff = await run_pipeline(shop, [profile(cli, fake)], connections=connections)
    assert task.state is TaskState.DONE, task.error
    # Under the default network (allowlist) the CLI's only way out was T25's proxy, and its
    # model endpoint, a loopback address named by its own base-URL setting, was let through.
    assert any(c.allowed and c.port == fake.port for c in connections), connections
    refused = [c for c in connections if not c.allowed]
    if cli == "opencode":  # it reaches for registry.npmjs.org whatever its config says
        refused = [c for c in refused if c.host != "registry.npmjs.org"]
    assert refused == [], refused
    assert dev.adapter == cli and dev.cli_version, dev
    assert dev.usage.input_tokens > 0 and dev.usage.output_tokens > 0
    assert dev.cost_usd > 0
    # The other roles are scripted: every request the fake served was the dev agent's. The
    # CLI reports them one by one (or per turn, or per model: never more than were served),
    # and together they are the run's input.
    served = [r for r in fake.requests if r["api"]]
    assert 1 <= len(dev.requests) <= len(served), (dev.requests, len(served))
    assert sum(r.input_tokens + r.cache_read_tokens for r in dev.requests) == (
        dev.usage.input_tokens + dev.usage.cache_read_tokens
    )
    worktree = shop / ".factory" / "worktrees" / task.id
    assert (worktree / "greeting.txt").read_text() == "hello from the agent\n"
    assert "greeting.txt" in diff and "+hello from the agent" in diff
    assert git_sync("status", "--porcelain", cwd=worktree) == ""  # T25 committed it
    assert any(r["api"] for r in fake.requests)
    assert_offline(cli, fake)


# Which error each first adapter gets, and who takes over.
FALLBACKS = [
    ("claude", "quota", "codex"),
    ("claude", "429", "gemini"),
    ("claude", "usage", "aider"),
    ("codex", "quota", "claude"),
    ("codex", "usage", "gemini"),
    ("gemini", "quota", "claude"),
]
API = {"claude": "anthropic", "codex": "openai", "gemini": "gemini"}


@pytest.mark.parametrize(("first", "error", "second"), FALLBACKS)
async def test_quota_on_the_first_adapter_falls_back_to_the_second(
    first, error, second, fake, shop
):
    need(first)
    need(second)
    fake.fail_next(error, times=100, api=API[first])
    task, dev, diff = await run_pipeline(shop, [profile(first, fake), profile(second, fake)])
    assert task.state is TaskState.DONE, task.error
    assert dev.adapter == second
    assert f"{first}: quota exhausted" in dev.adapter_reason
    assert dev.attempts == 1  # the fallback happened inside the run: no attempt spent
    assert "greeting.txt" in diff
    assert_offline(first, fake)


async def test_an_overloaded_provider_is_retried_with_backoff(fake, shop):
    need("claude")
    fake.fail_next("overload", times=1, api="anthropic")
    task, dev, _ = await run_pipeline(shop, [profile("claude", fake)], backoff=(0.1, 0.2))
    assert task.state is TaskState.DONE, task.error
    assert dev.adapter == "claude" and "overloaded, retried" in dev.adapter_reason


@pytest.mark.parametrize("cli", CLIS)
async def test_a_prompt_with_dashes_and_shell_metacharacters_reaches_the_model_literally(
    cli, fake, tmp_path
):
    need(cli)
    work = tmp_path / "work"
    work.mkdir()
    git_sync("init", "-q", cwd=work)
    prompt = "--version; touch pwned $(touch pwned2) `touch pwned3` | cat > pwned4 & echo"
    entry = profile(cli, fake)
    request = AgentRequest(
        task_id="T-1",
        run_id="R-1",
        role="dev",
        stage=TaskState.IMPLEMENTING,
        prompt=prompt,
        cwd=work,
        model=MODELS[cli],
        args=tuple(entry.get("args", ())),
        env_passthrough=tuple(entry.get("env_passthrough", ())),
        private_home=True,
        timeout_s=120,
        log_dir=tmp_path / "run-logs",
    )

    async def sink(stream: str, text: str) -> None:
        pass

    result = await builtin_adapters()[cli].run(request, sink, asyncio.Event())
    assert result.ok, result.error
    assert any(prompt in str(r.get("body")) for r in fake.requests), "prompt not seen verbatim"
    assert not list(work.glob("pwned*"))
    assert (work / "greeting.txt").exists()
    assert "worker-secret-never-passed" not in str(fake.requests)
    assert_offline(cli, fake)


async def test_a_quota_failure_is_classified_and_carries_the_message(fake, tmp_path):
    need("claude")
    fake.fail_next("quota", times=10, api="anthropic")
    request = AgentRequest(
        task_id="T-1",
        run_id="R-1",
        role="dev",
        stage=TaskState.IMPLEMENTING,
        prompt="hi",
        cwd=tmp_path,
        model=MODELS["claude"],
        private_home=True,
        timeout_s=60,
        log_dir=tmp_path / "run-logs",
    )

    async def sink(stream: str, text: str) -> None:
        pass

    result = await builtin_adapters()["claude"].run(request, sink, asyncio.Event())
    assert result.failure is Failure.QUOTA and "Credit balance is too low" in result.error


async def test_a_provider_still_overloaded_after_the_retries_falls_back_to_the_next(fake, shop):
    need("claude")
    need("codex")
    fake.fail_next("overload", times=100, api="anthropic")
    task, dev, _ = await run_pipeline(
        shop, [profile("claude", fake), profile("codex", fake)], backoff=(0.05,)
    )
    assert task.state is TaskState.DONE, task.error
    assert (
        dev.adapter == "codex" and "claude: still overloaded after 1 retries" in dev.adapter_reason
    )


async def test_an_overload_with_no_one_to_fall_back_to_fails_the_task_saying_so(fake, shop):
    need("claude")
    fake.fail_next("overload", times=100, api="anthropic")
    task, dev, _ = await run_pipeline(shop, [profile("claude", fake)], backoff=(0.05,))
    assert task.state is TaskState.FAILED
    assert "529" in task.error and "Overloaded" in task.error
    assert dev.adapter == "claude"
