"""Each role's tool set, with the real CLIs against the fake model.

A reading role (spec, planner, QA, reviewer, security) cannot write a file in its worktree
through its own CLI's tools while the model asks it to, with a file-writing tool or a shell
command: Claude Code, Gemini CLI and opencode are never offered the tool, Codex's read-only
sandbox refuses the write, aider answers in ask mode and a dry run. The same model with the
dev role's set does write, so each refusal is the tool set's doing. And the fixed part of
every request (system prompt and tool schemas) shrinks: Claude Code's to at most a quarter
of a plain `claude -p`'s for a reading role.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from core.domain.tools import role_tools
from core.workspace.git import git_sync
from tests.support.fakemodel.server import FakeModel
from tests.support.real_clis import (
    CLIS,
    assert_offline,
    need,
    profile,
    run_cli,
    run_pipeline,
)

PLANTED = "planted.txt"
# What the model asks for on its first turn: a file-writing tool, or a shell command.
ASKS = ("file", "command")


def insist_on_claude_tools(fake: FakeModel, tool: str) -> None:
    """Make the fake a prompt-injected model for Claude Code: whenever a request offers tools,
    its first turn calls `tool` (Bash or Write), whether that tool was offered or not."""
    script = fake.anthropic

    def anthropic(body: dict) -> list[tuple[str, dict]]:
        if not body.get("tools"):  # a side request (a title): answered as before
            return script(body)
        events = script({**body, "tools": [*body["tools"], {"name": "Bash"}]})
        for _, event in events:
            block = event.get("content_block") or {}
            if tool == "Write" and block.get("type") == "tool_use":
                block["name"] = "Write"
            delta = event.get("delta") or {}
            if tool == "Write" and delta.get("type") == "input_json_delta":
                delta["partial_json"] = json.dumps(
                    {"file_path": fake.file, "content": fake.content}
                )
        return events

    fake.anthropic = anthropic  # type: ignore[method-assign]


def hostile(fake: FakeModel, cli: str, ask: str, work: Path) -> None:
    """Script the fake's first turn to write `planted.txt` in `work` as `ask` says."""
    fake.file = str(work / PLANTED)
    if ask == "command":
        fake.command = f"printf planted > {work / PLANTED}"
    if cli == "claude":
        insist_on_claude_tools(fake, "Bash" if ask == "command" else "Write")


def worktree(tmp_path: Path) -> Path:
    work = tmp_path / "work"
    work.mkdir()
    git_sync("init", "-q", cwd=work)
    (work / "README.md").write_text("a project\n")
    git_sync("add", "README.md", cwd=work)
    git_sync("-c", "user.name=t", "-c", "user.email=t@t", "commit", "-qm", "start", cwd=work)
    return work


# How each CLI's own tools answered the write (measured with the pinned versions).
REFUSED = {
    "claude": ("No such tool available",),
    "codex": ("blocked by read-only sandbox", "Read-only file system"),
    "gemini": ("not found",),
    "opencode": ("unavailable tool",),
}


def refused(fake: FakeModel, cli: str) -> bool:
    """Whether the model's write reached the CLI and its tools refused it (aider, with no
    tools, got the whole-file edit in the model's reply and applied none)."""
    said = " ".join(fake.tool_results())
    return cli == "aider" or any(words in said for words in REFUSED[cli])


# aider has no tools: its model can only send an edit, which `file` covers.
CASES = [(cli, ask) for cli in CLIS for ask in ASKS if cli != "aider" or ask != "command"]


@pytest.mark.parametrize(("cli", "ask"), CASES)
async def test_a_reading_role_cannot_write_through_its_own_clis_tools(cli, ask, fake, tmp_path):
    need(cli)
    work = worktree(tmp_path)
    hostile(fake, cli, ask, work)
    result = await run_cli(cli, fake, work, "reviewer", role_tools("reviewer"))
    assert refused(fake, cli), f"{cli}: {fake.tool_results()} {result.error}"
    assert not (work / PLANTED).exists(), f"{cli}: a reviewer wrote {PLANTED}"
    assert git_sync("status", "--porcelain", cwd=work) == ""
    assert_offline(cli, fake)


@pytest.mark.parametrize("cli", CLIS)
async def test_the_same_model_writes_with_the_dev_roles_set(cli, fake, tmp_path):
    """The control: the refusal above is the reading role's tool set, not a broken script."""
    need(cli)
    work = worktree(tmp_path)
    hostile(fake, cli, "file", work)
    result = await run_cli(cli, fake, work, "dev", role_tools("dev"))
    assert result.ok, result.error
    assert (work / PLANTED).exists(), f"{cli}: dev could not write {PLANTED}"


# -- what a request carries ------------------------------------------------------------------


def fixed_bytes(requests: list[dict]) -> int:
    """The fixed part of a CLI's first conversation request: its system prompt (or
    instructions, or developer messages) and its tool schemas, as JSON bytes."""
    bodies = [r["body"] for r in requests if r.get("api")]
    body = next((b for b in bodies if b.get("tools")), bodies[0])
    parts = [body.get(key) for key in ("tools", "system", "instructions", "systemInstruction")]
    parts += [
        m
        for m in [*(body.get("input") or []), *(body.get("messages") or [])]
        if isinstance(m, dict) and m.get("role") in ("system", "developer")
    ]
    return sum(len(json.dumps(p, ensure_ascii=False).encode()) for p in parts if p)


async def fixed_part(
    cli: str, fake: FakeModel, tmp_path: Path, role: str, tools: frozenset[str] | None
) -> int:
    """One run of `role` with `tools` (None: the CLI's own defaults) in a fresh tree, and
    the fixed part of its request."""
    start = len(fake.requests)
    work = tmp_path / f"{role}-{'cli' if tools is None else 't25'}"
    work.mkdir()
    git_sync("init", "-q", cwd=work)
    result = await run_cli(cli, fake, work, role, tools)
    assert result.ok, result.error
    return fixed_bytes(fake.requests[start:])


@pytest.mark.parametrize("cli", CLIS)
async def test_t25s_configuration_sends_fewer_bytes_than_the_clis_defaults(cli, fake, tmp_path):
    need(cli)
    plain = await fixed_part(cli, fake, tmp_path, "dev", None)
    dev = await fixed_part(cli, fake, tmp_path, "dev", role_tools("dev"))
    reading = await fixed_part(cli, fake, tmp_path, "reviewer", role_tools("reviewer"))
    assert reading < plain and dev <= plain, (cli, plain, dev, reading)
    if cli != "aider":  # no tools, and nothing of its prompt T25 drops for dev
        assert dev < plain
    if cli == "claude":
        # Measured on 2.1.197: plain 109 KB; dev 27.9 KB (25.5 %); a reading role 20.2 KB (18 %).
        assert reading <= plain / 4, (plain, reading)
        assert dev <= plain * 0.3, (plain, dev)


# -- from t25.yaml to the CLI ----------------------------------------------------------------


def offered(fake: FakeModel) -> set[str]:
    """The tools Claude Code offered in the task's first conversation request."""
    bodies = [r["body"] for r in fake.requests if r.get("api") and r["body"].get("tools")]
    return {t["name"] for t in bodies[0]["tools"]}


@pytest.mark.parametrize(
    ("tools", "expected"),
    [
        (None, {"Read", "Grep", "Glob", "Write", "Edit", "Bash"}),  # the dev role's own set
        (["read", "edit"], {"Read", "Write", "Edit"}),
    ],
)
async def test_a_profiles_tool_set_reaches_the_cli_through_a_whole_pipeline(
    tools, expected, fake, shop
):
    need("claude")
    entry = profile("claude", fake) | ({"tools": tools} if tools is not None else {})
    task, dev, _ = await run_pipeline(shop, [entry])
    assert dev is not None and dev.adapter == "claude", task.error
    assert offered(fake) == expected


async def test_tools_cli_keeps_the_clis_own_tools(fake, shop):
    need("claude")
    task, dev, _ = await run_pipeline(shop, [profile("claude", fake) | {"tools": "cli"}])
    assert dev is not None and dev.adapter == "claude", task.error
    assert {"Agent", "WebFetch", "Bash", "Write"} <= offered(fake)
