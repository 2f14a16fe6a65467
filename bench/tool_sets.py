"""What one request of each real agent CLI carries, through its T25 adapter against the fake
model server: with the CLI's own defaults (`tools: cli`), with the dev role's tool set and
with a reading role's. Per run: requests, the fixed part of the first conversation request
(system prompt, instructions or developer messages, and tool schemas, as JSON bytes), every
request's bytes, the tools offered, and whether the model's file write landed. It exits
non-zero unless every run succeeded after asking the model, and each dev run's write landed.
Run by hand:

    .venv/bin/python bench/tool_sets.py [claude,codex,gemini,opencode,aider]
"""

from __future__ import annotations

import asyncio
import json
import os
import sys
import tempfile
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from checked import happened

from core.domain.tools import role_tools
from core.workspace.git import git_sync
from tests.support.fakemodel.server import FakeModel
from tests.support.real_clis import FINAL, MODELS, SEARCH, run_cli

RUNS = (("defaults", "dev", None), ("dev", "dev", "dev"), ("reading", "reviewer", "reviewer"))


def size(value: object) -> int:
    return len(json.dumps(value, ensure_ascii=False).encode()) if value else 0


def offered(body: dict) -> list[str]:
    tools = body.get("tools") or []
    names = [t.get("name") or (t.get("function") or {}).get("name") for t in tools]
    names += [d.get("name") for t in tools for d in t.get("functionDeclarations") or []]
    return [n for n in names if n]


def fixed(body: dict) -> int:
    parts = [body.get(key) for key in ("tools", "system", "instructions", "systemInstruction")]
    parts += [
        m
        for m in [*(body.get("input") or []), *(body.get("messages") or [])]
        if isinstance(m, dict) and m.get("role") in ("system", "developer")
    ]
    return sum(size(p) for p in parts)


def environment(fake: FakeModel) -> dict[str, str]:
    """Each CLI's login and endpoint pointing at the fake, as tests/support/real_clis.py."""
    provider = {
        "npm": "@ai-sdk/openai-compatible",
        "name": "fake",
        "options": {"baseURL": fake.base_url + "/v1", "apiKey": "dummy"},
        "models": {"fake-model": {"name": "fake-model"}},
    }
    return {
        **fake.proxy_env(),
        "PATH": f"{SEARCH}{os.pathsep}{os.environ.get('PATH', '')}",
        "T25_RUN_HOMES": str(Path.home() / ".cache" / "t25" / "bench-homes"),
        "ANTHROPIC_BASE_URL": fake.base_url,
        "ANTHROPIC_API_KEY": "dummy",
        "FAKE_API_KEY": "dummy",
        "GEMINI_API_KEY": "dummy",
        "GOOGLE_GEMINI_BASE_URL": fake.base_url,
        "OPENAI_API_BASE": fake.base_url + "/v1",
        "OPENAI_API_KEY": "dummy",
        "OPENCODE_CONFIG_CONTENT": json.dumps(
            {"autoupdate": False, "share": "disabled", "provider": {"fake": provider}}
        ),
    }


async def one(cli: str, role: str, tools: frozenset[str] | None) -> dict:
    with FakeModel(final=FINAL) as fake, tempfile.TemporaryDirectory() as where:
        os.environ.update(environment(fake))
        work = Path(where)
        git_sync("init", "-q", cwd=work)
        result = await run_cli(cli, fake, work, role, tools, "Add a greeting file.")
        bodies = [r["body"] for r in fake.requests if r.get("api")]
        first = next((b for b in bodies if b.get("tools")), bodies[0] if bodies else {})
        return {
            "ok": result.ok,
            "requests": len(bodies),
            "fixed": fixed(first),
            "total": sum(size(b) for b in bodies),
            "tools": offered(first),
            "wrote": (work / fake.file).exists(),
        }


async def main(clis: list[str]) -> None:
    print(f"{'cli':9} {'run':9} {'ok':3} {'req':>3} {'fixed B':>8} {'all B':>8} wrote  tools")
    for cli in clis:
        base = None
        for label, role, tools_of in RUNS:
            tools = role_tools(tools_of) if tools_of else None
            got = await one(cli, role, tools)
            happened(
                got["ok"] and got["requests"] > 0 and (got["wrote"] or role != "dev"),
                f"{cli} {label}: ok {got['ok']} after {got['requests']} model requests, "
                f"write landed {got['wrote']}",
            )
            base = base or got["fixed"]
            share = f"{100 * got['fixed'] / base:5.1f}%" if base else "-"
            print(
                f"{cli:9} {label:9} {'yes' if got['ok'] else 'NO':3} {got['requests']:>3} "
                f"{got['fixed']:>8} {got['total']:>8} {'yes' if got['wrote'] else 'no ':5}  "
                f"{share} {len(got['tools'])}: {', '.join(got['tools'])}"
            )


if __name__ == "__main__":
    chosen = sys.argv[1].split(",") if len(sys.argv) > 1 else list(MODELS)
    asyncio.run(main(chosen))
