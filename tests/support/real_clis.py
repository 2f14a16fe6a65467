"""The real agent CLIs against T25's fake model server (`fake`, a fixture).
A test that needs a CLI skips when its binary is absent - unless T25_REQUIRE_REAL_CLIS=1 (set in
`.ci/run`), which turns that skip into a failure. Binaries are found in $T25_CLI_BIN_DIR, else
in .tools/npm/node_modules/.bin (and aider in .tools/aider/bin), else on PATH."""

from __future__ import annotations

import asyncio
import json
import os
import shutil
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

from adapters.base import CliAdapter
from adapters.checks import run_check
from adapters.registry import builtin_adapters
from adapters.scripted import ScriptedSpec
from core.config.schema import load_config
from core.control.service import ControlPlane
from core.domain.agent import AgentRequest, AgentResult
from core.domain.events import RunOutput
from core.domain.models import ArtifactKind, Run, Task, TaskState
from core.domain.network import NETWORK_STREAM, Connection
from store import open_store
from t25_tui.runtime import local_sweeper
from tests.support.fakemodel.server import FakeModel
from tests.support.pipeline import write_config

REPO = Path(__file__).resolve().parents[2]

BIN_DIR = Path(
    os.environ.get("T25_CLI_BIN_DIR") or REPO / ".tools" / "npm" / "node_modules" / ".bin"
)


AIDER_DIR = REPO / ".tools" / "aider" / "bin"  # aider's own virtual environment

SEARCH = f"{BIN_DIR}{os.pathsep}{AIDER_DIR}"

REQUIRED = os.environ.get("T25_REQUIRE_REAL_CLIS") == "1"

# The dev stage's answer, as the IMPLEMENTING stage must parse it.
FINAL = json.dumps(
    {"summary": "Added greeting.txt with a greeting", "files_changed": ["greeting.txt"]}
)

# One answer every stage accepts, each reading its own fields and ignoring the others': for a
# whole task with a real CLI in every role (bench/tokens.py, test_base_prompts.py).
EVERY_STAGE = json.dumps(
    {
        "summary": "Added greeting.txt with a greeting",
        "acceptance_criteria": ["greeting.txt holds a greeting"],
        "steps": ["write greeting.txt"],
        "files": ["greeting.txt"],
        "risk": "low",
        "rationale": "one new text file",
        "files_changed": ["greeting.txt"],
        "concerns": [],
        "findings": [],
    }
)


MODELS = {
    "claude": "claude-sonnet-4-5",
    "codex": "gpt-5.5",
    "gemini": "gemini-2.5-pro",
    "opencode": "fake/fake-model",
    "aider": "openai/fake-model",
}


def need(binary: str) -> None:
    """Skip (or, in CI, fail) when a real CLI is not installed."""
    if shutil.which(binary, path=f"{SEARCH}{os.pathsep}{os.environ.get('PATH', '')}"):
        return
    message = f"{binary} is not installed (run .ci/run, or set T25_CLI_BIN_DIR)"
    if REQUIRED:
        pytest.fail(f"T25_REQUIRE_REAL_CLIS=1 but {message}")
    pytest.skip(message)


@pytest.fixture
def fake(monkeypatch, tmp_path) -> Iterator[FakeModel]:
    """The fake model server, the proxy of every run, and T25's environment pointing at it."""
    with FakeModel(final=FINAL) as server:
        monkeypatch.setenv("PATH", f"{SEARCH}{os.pathsep}{os.environ.get('PATH', '')}")
        monkeypatch.setenv("T25_RUN_HOMES", str(Path.home() / ".cache" / "t25" / "test-homes"))
        for key, value in server.proxy_env().items():
            monkeypatch.setenv(key, value)
        # Each CLI's own login and endpoint, as a user's shell would hold them.
        monkeypatch.setenv("ANTHROPIC_BASE_URL", server.base_url)
        monkeypatch.setenv("ANTHROPIC_API_KEY", "dummy-anthropic")
        monkeypatch.setenv("FAKE_API_KEY", "dummy-openai")
        monkeypatch.setenv("GEMINI_API_KEY", "dummy-gemini")
        monkeypatch.setenv("OPENAI_API_BASE", server.base_url + "/v1")  # aider's endpoint
        monkeypatch.setenv("OPENAI_API_KEY", "dummy-openai")
        monkeypatch.setenv("GOOGLE_GEMINI_BASE_URL", server.base_url)
        monkeypatch.setenv(
            "OPENCODE_CONFIG_CONTENT",
            json.dumps(
                {
                    "autoupdate": False,
                    "share": "disabled",
                    "provider": {
                        "fake": {
                            "npm": "@ai-sdk/openai-compatible",
                            "name": "fake",
                            "options": {
                                "baseURL": server.base_url + "/v1",
                                "apiKey": "dummy-openai",
                            },
                            "models": {"fake-model": {"name": "fake-model"}},
                        }
                    },
                }
            ),
        )
        # T25's own secrets are in the environment too: they must never reach an agent.
        monkeypatch.setenv("FACTORY_WORKER_CREDENTIAL", "worker-secret-never-passed")
        yield server


def profile(cli: str, fake: FakeModel) -> dict:
    """A t25.yaml profile that runs `cli` against the fake, with a private HOME."""
    entry: dict = {"adapter": cli, "model": MODELS[cli], "private_home": True, "timeout_s": 120}
    if cli == "codex":
        provider = (
            f'{{name="fake", base_url="{fake.base_url}/v1", wire_api="responses", '
            'env_key="FAKE_API_KEY", request_max_retries=0, stream_max_retries=0}'
        )
        entry["args"] = ["-c", "model_provider=fake", "-c", f"model_providers.fake={provider}"]
        entry["env_passthrough"] = ["FAKE_API_KEY"]
    return entry


def opencode_escapes_ok(escapes: list[dict]) -> list[dict]:
    """opencode 1.18.33 reaches for registry.npmjs.org once per run whatever its config says;
    the proxy refuses it and the run goes on. Anything else is a real escape."""
    return [e for e in escapes if e["target"] != "registry.npmjs.org:443"]


CLIS = ("claude", "codex", "gemini", "opencode", "aider")

RATES = {
    name: {"input": 3.0, "output": 15.0}
    for name in (
        "claude-sonnet-4-5",
        "gpt-5.5",
        "gemini-2.5-pro",
        "fake/fake-model",
        "openai/fake-model",
        "scripted-1",
    )
}


async def run_pipeline(
    repo: Path,
    dev_chain: list[dict],
    *,
    backoff: tuple[float, ...] = (),
    connections: list[Connection] | None = None,
):
    """The pipeline with `dev_chain` as dev and the scripted agent in every other role;
    the dev runs' connections through T25's proxy go to `connections` when given."""
    write_config(repo, roles={"dev": dev_chain}, cost={"rates": RATES})
    config = load_config(repo / "t25.yaml")
    store = await open_store(config.store_url)
    control = ControlPlane(config, store)
    await control.sync_projects()
    adapters = {**builtin_adapters(), "scripted": CliAdapter(ScriptedSpec())}
    sweeper = local_sweeper(control, adapters, run_check, heartbeat_s=0.5)
    for worker in sweeper.pool.workers:
        worker.overload_backoff_s = backoff
    task = await control.new_task("Add a greeting file", actor="ana")
    try:
        await asyncio.wait_for(sweeper.work(), 240)
        task = await control.task(task.id)
        runs = await store.list_runs(task_id=task.id)
        artifacts = await store.list_artifacts(task_id=task.id)
        diff = [a for a in artifacts if a.meta.kind is ArtifactKind.DIFF]
        diff_text = (await store.get_artifact(diff[-1].id))[1].decode() if diff else ""
        devs = {r.id for r in runs if r.role == "dev"}
        for event in await store.events_after(0, task_id=task.id):
            recorded = isinstance(event, RunOutput) and event.stream == NETWORK_STREAM
            if recorded and event.run_id in devs and connections is not None:
                connections.append(Connection.from_text(event.text))
    finally:
        await store.close()
    dev = [r for r in runs if r.role == "dev"]
    return task, dev[-1] if dev else None, diff_text


def assert_offline(cli: str, fake) -> None:
    escapes = opencode_escapes_ok(fake.escapes) if cli == "opencode" else fake.escapes
    assert escapes == [], f"{cli} tried to reach the internet: {escapes}"


FIRST, SECOND = "T25-ROUND: 1", "T25-ROUND: 2"  # what each round's prompt carries


@dataclass
class SendBack:
    """A task through a review send-back: its dev runs, and the model requests of each."""

    task: Task
    dev: list[Run]
    first: list[dict]  # the requests of the first dev run
    second: list[dict]  # ... and of the dev run the review sent the task back to

    @staticmethod
    def size(requests: list[dict]) -> int:
        """Bytes sent to the model: each request's JSON body."""
        return sum(len(json.dumps(r["body"]).encode()) for r in requests)


async def send_back_loop(cli: str, fake: FakeModel, repo: Path, *, resume: bool) -> SendBack:
    """One task with `cli` as the dev agent, sent back once by review."""
    dev = {**profile(cli, fake), "private_home": False, "sandbox": "none", "resume": resume}
    write_config(repo, roles={"dev": [dev]}, cost={"rates": RATES})
    config = load_config(repo / "t25.yaml")
    store = await open_store(config.store_url)
    try:
        control = ControlPlane(config, store)
        await control.sync_projects()
        adapters = {**builtin_adapters(), "scripted": CliAdapter(ScriptedSpec())}
        sweeper = local_sweeper(control, adapters, run_check, heartbeat_s=0.5)
        task = await control.new_task(
            "Add a greeting file", actor="ana", description="scripted: review=changes-once"
        )
        await asyncio.wait_for(sweeper.work(), 300)
        task = await control.task(task.id)
        runs = [r for r in await store.list_runs(task_id=task.id) if r.role == "dev"]
    finally:
        await store.close()
    asked = [r for r in fake.requests if r.get("api")]
    return SendBack(
        task,
        runs,
        [
            r
            for r in asked
            if FIRST in json.dumps(r["body"]) and SECOND not in json.dumps(r["body"])
        ],
        [r for r in asked if SECOND in json.dumps(r["body"])],
    )


async def run_cli(
    cli: str,
    fake: FakeModel,
    work: Path,
    role: str,
    tools: frozenset[str] | None,
    prompt: str = "Review this tree.",
) -> AgentResult:
    """One run of `cli` as `role` in `work` against the fake, with `tools`."""
    entry = profile(cli, fake)
    request = AgentRequest(
        task_id="T-1",
        run_id="R-1",
        role=role,
        stage=TaskState.IMPLEMENTING if role == "dev" else TaskState.REVIEW,
        prompt=prompt,
        cwd=work,
        model=MODELS[cli],
        args=tuple(entry.get("args", ())),
        env_passthrough=tuple(entry.get("env_passthrough", ())),
        private_home=True,
        timeout_s=120,
        tools=tools,
        log_dir=work.parent / "run-logs",  # as a worker's: never the temp directory's litter
    )

    async def sink(stream: str, text: str) -> None:
        pass

    return await builtin_adapters()[cli].run(request, sink, asyncio.Event())
