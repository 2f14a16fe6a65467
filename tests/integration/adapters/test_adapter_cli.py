"""The generic CliAdapter: what it hands a CLI (argv, environment, prompt) and how it classifies
what came back. Every case runs a real child: echo_cli.py or the scripted agent."""

from __future__ import annotations

import asyncio
import json
import os
from datetime import UTC, timedelta
from pathlib import Path

import pytest

from adapters import base
from adapters.base import CliAdapter, CliAdapterSpec
from adapters.containment import TAG_ENV
from adapters.process import ENV_ALLOWLIST
from adapters.prompt_files import PROMPT_FILE_THRESHOLD
from core.domain.agent import Failure
from core.domain.answers import QAAnswer, parse_answer
from core.domain.models import TaskState, utcnow
from core.errors import AnswerInvalid
from core.ports import AgentAdapter
from tests.support.agent_kit import ECHO_CLI, EchoSpec, Sink, alive, eventually, prompt_for


async def run(adapter, request, sink=None, abort=None):
    return await adapter.run(request, sink or Sink(), abort or asyncio.Event())


def logged(result) -> bytes:
    """The run's log, from the file it was spooled to."""
    assert result.log is not None
    return result.log.path.read_bytes()


def spawned_pid(result) -> int:
    for line in logged(result).decode().splitlines():
        if '"spawned"' in line:
            return json.loads(line)["pid"]
    raise AssertionError("the agent reported no child")


# -- what the CLI receives ---------------------------------------------------------------


async def test_t25_secrets_never_reach_the_agent(echo, make_request, monkeypatch):
    monkeypatch.setenv("FACTORY_WORKER_CREDENTIAL", "worker-secret")
    monkeypatch.setenv("T25_DATABASE_URL", "postgresql://t25:hunter2@db/t25")
    monkeypatch.setenv("ANTHROPIC_API_KEY", "sk-parent")
    result = await run(echo, make_request())
    assert result.ok, result.error
    env = json.loads(result.final_text)["env"]
    for secret in (
        "FACTORY_WORKER_CREDENTIAL",
        "T25_DATABASE_URL",
        "ANTHROPIC_API_KEY",
        "PYTEST_CURRENT_TEST",
    ):
        assert secret not in env
    assert "hunter2" not in json.dumps(env)
    assert env["TERM"] == "dumb"
    assert env["ECHO_CLI_HOME"] == EchoSpec.extra["ECHO_CLI_HOME"]
    # Python itself may add LC_CTYPE (PEP 538); nothing else beyond the allowlist.
    assert set(env) <= {*ENV_ALLOWLIST, "TERM", "LC_CTYPE", TAG_ENV, *EchoSpec.extra}


async def test_a_hostile_prompt_reaches_the_cli_literally(echo, make_request, workdir):
    prompt = (
        "--help --dangerously-skip-permissions $(rm -rf x); `touch pwned` | tee out && 'q\" \\\n* ~"
    )
    (workdir / "x").mkdir()
    result = await run(echo, make_request(prompt=prompt))
    assert result.ok, result.error
    report = json.loads(result.final_text)
    assert report["argv"][-1] == prompt and report["prompt"] == prompt
    assert report["cwd"] == str(workdir)
    assert sorted(p.name for p in workdir.iterdir()) == ["x"]


async def test_a_small_prompt_goes_inline(echo, make_request):
    result = await run(echo, make_request(prompt="a" * PROMPT_FILE_THRESHOLD))
    report = json.loads(result.final_text)
    assert report["argv"][:1] == ["-p"] and "prompt_file" not in report


async def test_a_prompt_over_100_kb_in_bytes_goes_through_a_private_temp_file(
    scripted, make_request, workdir
):
    # 60,000 characters, 120,000 bytes: the threshold counts bytes.
    prompt = prompt_for("QA", "é" * 60_000)
    assert len(prompt) < PROMPT_FILE_THRESHOLD < len(prompt.encode())
    result = await run(scripted, make_request(prompt=prompt))
    assert result.ok, result.error
    init = json.loads(logged(result).decode().splitlines()[0])
    path = Path(init["prompt_file"])
    assert init["prompt_file_mode"] == "0o600"
    assert init["prompt_bytes"] == len(prompt.encode())
    assert not path.resolve().is_relative_to(workdir.resolve())
    assert not path.exists()
    assert isinstance(parse_answer(TaskState.QA, result.final_text), QAAnswer)


async def test_the_temp_file_is_removed_after_a_timeout_too(scripted, make_request):
    prompt = prompt_for("QA", "z" * 150_000)
    result = await run(
        scripted, make_request(prompt=prompt, args=("--misbehave", "hang"), timeout_s=1)
    )
    assert result.failure is Failure.TIMEOUT
    init = json.loads(logged(result).decode().splitlines()[0])
    assert not Path(init["prompt_file"]).exists()
    await eventually(lambda: not alive(spawned_pid(result)))


# -- how outcomes are classified -------------------------------------------------------------


async def test_a_successful_run_fills_the_result(scripted, make_request):
    sink = Sink()
    result = await run(scripted, make_request("IMPLEMENTING"), sink)
    assert result.ok and result.failure is None and result.error is None
    assert result.adapter == "scripted" and result.cli_version == "0.1.0"
    assert result.model == "scripted-1" and result.usage.model == "scripted-1"
    assert result.exit_code == 0
    assert result.usage.input_tokens > 0 and result.usage.output_tokens > 0
    assert result.files_changed == ("changes/T-7.md",)
    assert result.duration_s > 0
    assert logged(result).decode() == sink.text()  # nothing on stderr: the log is stdout
    assert next(e["type"] for e in sink.events()) == "system"


async def test_the_requested_model_is_passed_and_reported(scripted, make_request):
    result = await run(scripted, make_request(model="scripted-large"))
    assert result.model == "scripted-large" == result.usage.model


async def test_a_quota_error_is_a_quota_failure_with_its_reset_time(scripted, make_request):
    before = utcnow()
    result = await run(scripted, make_request(args=("--misbehave", "quota")))
    assert result.failure is Failure.QUOTA
    assert "session limit" in result.error
    resets = result.quota_resets_at
    assert resets is not None and resets.tzinfo is not None
    assert resets.astimezone(UTC).hour == 5 and resets.minute == 0
    assert before < resets <= before + timedelta(days=1)


async def test_a_non_zero_exit_is_an_exit_failure_with_a_useful_error(scripted, make_request):
    result = await run(scripted, make_request(args=("--misbehave", "exit:3")))
    assert result.failure is Failure.EXIT and result.exit_code == 3
    assert (
        result.error == "exited with status 3: t25-scripted-agent: exiting with status 3 on purpose"
    )


async def test_an_error_the_cli_reports_is_an_exit_failure(scripted, make_request):
    result = await run(scripted, make_request(prompt="no header at all"))
    assert result.failure is Failure.EXIT and result.exit_code == 2
    assert "no T25-STAGE header" in result.error


async def test_a_timeout_kills_the_agent_and_its_children(scripted, make_request):
    result = await run(scripted, make_request(args=("--misbehave", "hang"), timeout_s=1))
    assert result.failure is Failure.TIMEOUT and result.exit_code is None
    assert result.error == "timed out after 1 s; process group killed"
    await eventually(lambda: not alive(spawned_pid(result)))


async def test_abort_stops_the_agent_and_its_children(scripted, make_request):
    sink, abort = Sink(), asyncio.Event()
    running = asyncio.create_task(
        run(scripted, make_request(args=("--misbehave", "hang")), sink, abort)
    )
    await eventually(lambda: any(e.get("subtype") == "spawned" for e in sink.events()))
    abort.set()
    result = await running
    assert result.failure is Failure.ABORTED and result.exit_code is None
    await eventually(lambda: not alive(spawned_pid(result)))


async def test_garbage_output_is_a_run_whose_answer_does_not_parse(scripted, make_request):
    result = await run(scripted, make_request("PLAN", args=("--misbehave", "garbage")))
    assert result.ok
    with pytest.raises(AnswerInvalid, match="no JSON object"):
        parse_answer(TaskState.PLAN, result.final_text)


async def test_a_flood_with_a_huge_line_still_ends_in_an_answer(scripted, make_request):
    sink = Sink()
    result = await run(scripted, make_request("QA", args=("--misbehave", "flood:3000000")), sink)
    assert result.ok, result.error
    assert max(len(line) for line in sink.text().splitlines()) > 100_000
    assert sink.text("stderr") and len(logged(result)) >= 3_000_000
    parse_answer(TaskState.QA, result.final_text)


async def test_a_missing_binary_is_a_spawn_failure(make_request):
    class Missing(CliAdapterSpec):
        name, binary = "missing", "t25-no-such-agent"

    adapter = CliAdapter(Missing())
    assert adapter.locate() is None and await adapter.version() is None
    result = await run(adapter, make_request())
    assert result.failure is Failure.SPAWN and "not found" in result.error


async def test_a_parser_that_chokes_is_an_exit_failure_not_an_exception(make_request):
    class Choking(EchoSpec):
        def parse(self, stdout):
            raise KeyError("result")

    result = await run(CliAdapter(Choking()), make_request())
    assert result.failure is Failure.EXIT and "unreadable output" in result.error


async def test_the_version_is_read_once(tmp_path, make_request):
    counter = tmp_path / "calls"
    spec = EchoSpec()
    spec.version_args = (str(ECHO_CLI), "--version", str(counter))
    adapter = CliAdapter(spec)
    assert await adapter.version() == "3.2.1"
    assert await adapter.version() == "3.2.1"
    await run(adapter, make_request())
    assert counter.read_text().count("called") == 1


async def test_callers_asking_while_the_version_is_read_share_one_probe(tmp_path):
    """A worker pool reads each CLI's version as it starts; the first run's announcement,
    asking meanwhile, waits for that reading instead of starting another `--version`."""
    counter = tmp_path / "calls"
    spec = EchoSpec()
    spec.version_args = (str(ECHO_CLI), "--version", str(counter))
    adapter = CliAdapter(spec)

    got = await asyncio.gather(*(adapter.version() for _ in range(5)))

    assert got == ["3.2.1"] * 5
    assert counter.read_text().count("called") == 1


# A CLI whose first `--version` outlasts the probe's timeout (a loaded machine), then answers.
SLOW_FIRST_VERSION = (
    "import os, sys, time\n"
    "first = not os.path.exists(sys.argv[1])\n"
    "open(sys.argv[1], 'a').close()\n"
    "time.sleep(30 if first else 0)  # not a wait: the CLI is slow to start, once\n"
    "print('echo-cli version 3.2.1')\n"
)


async def test_a_version_probe_that_timed_out_is_asked_again_not_kept_unknown(
    tmp_path, monkeypatch
):
    monkeypatch.setattr(base, "VERSION_TIMEOUT_S", 1.0)
    spec = EchoSpec()
    spec.version_args = ("-c", SLOW_FIRST_VERSION, str(tmp_path / "started"))
    adapter = CliAdapter(spec)
    assert await adapter.version() is None
    assert await adapter.version() == "3.2.1"


def test_the_scripted_adapter_is_an_agent_adapter(scripted):
    assert isinstance(scripted, AgentAdapter)
    assert os.access(scripted.locate(), os.X_OK)
