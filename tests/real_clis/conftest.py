"""Real agent CLIs (installed by `.ci/run` into .tools/npm) against T25's fake model server.

A test that needs a CLI skips when its binary is absent - unless T25_REQUIRE_REAL_CLIS=1 (set in
`.ci/run`), which turns that skip into a failure. Binaries are found in $T25_CLI_BIN_DIR, else
in .tools/npm/node_modules/.bin (and aider in .tools/aider/bin), else on PATH.
"""

from __future__ import annotations

import json
import os
import shutil
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.fakemodel.server import FakeModel

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
