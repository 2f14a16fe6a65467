"""The split of a model request into system prompt, tool schemas and messages
(tests/support/fakemodel/parts.py, what bench/tokens.py measures), for each API, and against what
each real CLI sends: the three parts hold nearly the whole body, and the system prompt is
found wherever the CLI puts it."""

from __future__ import annotations

import asyncio

import pytest

from adapters.registry import builtin_adapters
from core.domain.agent import AgentRequest
from core.domain.models import TaskState
from tests.support.fakemodel.parts import Parts, parts, size
from tests.support.real_clis import need, profile
from tests.support.repos import make_repo

CLIS = ("claude", "codex", "gemini", "opencode", "aider")


def logged(path: str, body: dict) -> dict:
    return {"path": path, "body": body}


def test_each_api_names_its_parts_its_own_way():
    anthropic = {"system": "be brief", "tools": [{"name": "Read"}], "messages": ["hi"]}
    assert parts(logged("/v1/messages?beta=true", anthropic)) == Parts(
        size("be brief"), size([{"name": "Read"}]), size(["hi"])
    )
    developer = {"role": "developer", "content": "rules"}
    responses = {"instructions": "be brief", "input": [developer, {"role": "user"}], "tools": []}
    assert parts(logged("/v1/responses", responses)) == Parts(
        size("be brief") + size([developer]), size([]), size([{"role": "user"}])
    )
    system = {"role": "system", "content": "be brief"}
    chat = {"messages": [system, {"role": "user", "content": "hi"}], "model": "m"}
    assert parts(logged("/v1/chat/completions", chat)) == Parts(
        size([system]), 0, size([{"role": "user", "content": "hi"}])
    )
    gemini = {"systemInstruction": {"parts": [{"text": "be brief"}]}, "contents": [], "tools": []}
    assert parts(logged("/v1beta/models/m:streamGenerateContent?alt=sse", gemini)) == Parts(
        size(gemini["systemInstruction"]), size([]), size([])
    )
    assert parts(logged("/v1/messages", {})) == Parts()


@pytest.mark.parametrize("cli", CLIS)
async def test_the_split_holds_what_each_real_cli_sends(cli, fake, tmp_path):
    need(cli)
    entry = profile(cli, fake)
    request = AgentRequest(
        task_id="T-1",
        run_id="R-1",
        role="dev",
        stage=TaskState.IMPLEMENTING,
        prompt="Add a greeting file",
        cwd=make_repo(tmp_path / "repo"),  # Codex runs in a repository only
        model=entry["model"],
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
    served = [r for r in fake.requests if r["api"]]
    assert served
    for sent in served:
        split = parts(sent)
        assert split.system > 0, f"{cli} sent no system prompt the split found"
        assert split.total >= 0.8 * size(sent["body"]), (split, size(sent["body"]))
