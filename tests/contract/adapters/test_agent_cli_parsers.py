"""Each real CLI's spec against its captured output (tests/contract/adapters/captures/, recorded from
the real binaries): final answer, files, usage, errors, and the failure class T25 derives."""

from __future__ import annotations

from datetime import UTC, datetime
from pathlib import Path

import pytest

from adapters.aider import AiderSpec
from adapters.base import CliAdapter
from adapters.claude import ClaudeSpec
from adapters.codex import CodexSpec
from adapters.gemini import GeminiSpec
from adapters.opencode import OpencodeSpec
from adapters.parsing import classify_error, reset_time
from adapters.process import ProcessResult
from adapters.prompt_files import PromptArg
from core.domain.agent import AgentRequest, Failure
from core.domain.models import TaskState

CAPTURES = Path(__file__).with_name("captures")
DONE = "Done: created hello.txt containing hi."


def read(name: str) -> str:
    return (CAPTURES / name).read_text(encoding="utf-8")


def outcome(spec, stdout: str, *, stderr: str = "", code: int = 0):
    """What CliAdapter makes of a process that printed `stdout` and exited with `code`."""
    request = AgentRequest(
        task_id="T-1",
        run_id="R-1",
        role="dev",
        stage=TaskState.IMPLEMENTING,
        prompt="p",
        cwd=Path("/tmp"),
    )
    done = ProcessResult(exit_code=code, stdout=stdout.encode(), stderr=stderr.encode(), log=b"")
    return CliAdapter(spec)._result(request, "x", done)


# -- Claude Code ---------------------------------------------------------------------------


def test_claude_success_with_a_write_tool():
    parsed = ClaudeSpec().parse(read("claude/write-tool.stream.jsonl"))
    assert parsed.final_text == DONE and not parsed.is_error
    assert parsed.files_changed == ("/scratch/repo-claude-VEQ8/hello.txt",)
    assert (parsed.usage.input_tokens, parsed.usage.output_tokens) == (2400, 84)
    assert parsed.usage.model == "claude-sonnet-4-5"
    assert parsed.cost_usd == pytest.approx(0.00846)


@pytest.mark.parametrize(
    ("capture", "failure"),
    [
        ("err-429", Failure.QUOTA),
        ("err-usage", Failure.QUOTA),
        ("err-quota", Failure.QUOTA),
        ("err-usage-oauth", Failure.QUOTA),
        ("err-529", Failure.OVERLOAD),
        ("err-500", Failure.OVERLOAD),
        ("err-max-turns", Failure.EXIT),
    ],
)
def test_claude_errors_are_classified_from_its_real_messages(capture, failure):
    result = outcome(ClaudeSpec(), read(f"claude/{capture}.stream.jsonl"), code=1)
    assert result.failure is failure, result.error


def test_claude_success_after_its_own_retries_is_a_success():
    result = outcome(ClaudeSpec(), read("claude/err-429x2.stream.jsonl"), code=0)
    assert result.ok and result.final_text == DONE


def test_claude_subscription_limit_carries_its_reset_time():
    result = outcome(ClaudeSpec(), read("claude/err-usage-oauth.stream.jsonl"), code=1)
    assert result.quota_resets_at == datetime.fromtimestamp(1796015794, UTC)
    assert "session limit" in result.error


def test_claude_is_error_is_trusted_over_subtype_success():
    parsed = ClaudeSpec().parse(read("claude/err-429.stream.jsonl"))
    assert parsed.is_error and parsed.error.startswith("API Error: Request rejected (429)")


# -- Codex ---------------------------------------------------------------------------------


@pytest.mark.parametrize("capture", ["exec-shell", "exec-shell-gpt55-ephemeral", "apply-patch"])
def test_codex_success(capture):
    result = outcome(CodexSpec(), read(f"codex/{capture}.jsonl"))
    assert result.ok and result.final_text == DONE
    assert (result.usage.input_tokens, result.usage.output_tokens) == (3000, 80)


def test_codex_file_changes_are_reported():
    parsed = CodexSpec().parse(read("codex/apply-patch.jsonl"))
    assert parsed.files_changed == ("/scratch/repo-codex-A6iP/hello.txt",)


@pytest.mark.parametrize(
    ("capture", "failure"),
    [
        ("err-429", Failure.QUOTA),
        ("err-429default", Failure.QUOTA),
        ("err-quota", Failure.QUOTA),
        ("err-usage", Failure.QUOTA),
        ("err-529", Failure.OVERLOAD),
        ("err-500", Failure.OVERLOAD),
    ],
)
def test_codex_errors_are_classified(capture, failure):
    result = outcome(CodexSpec(), read(f"codex/{capture}.jsonl"), code=1)
    assert result.failure is failure, result.error


def test_codex_usage_limit_names_a_reset_in_the_next_day_at_most():
    result = outcome(CodexSpec(), read("codex/err-usage.jsonl"), code=1)
    assert result.quota_resets_at is not None
    assert (result.quota_resets_at.hour, result.quota_resets_at.minute) == (5, 8)


# -- Gemini CLI ----------------------------------------------------------------------------


@pytest.mark.parametrize("capture", ["ok", "ok-write_file", "err-429x2"])
def test_gemini_success(capture):
    result = outcome(
        GeminiSpec(),
        read(f"gemini/{capture}.stream-json.jsonl"),
        stderr=read("gemini/err-429x2.stderr-no-stacktraces.txt"),
    )
    assert result.ok and result.final_text == DONE, result.error  # retried 429s on stderr
    assert (result.usage.input_tokens, result.usage.output_tokens) == (3000, 60)
    assert result.usage.model == "gemini-3.8-flash"


def test_gemini_write_file_is_a_file_change():
    assert GeminiSpec().parse(read("gemini/ok-write_file.stream-json.jsonl")).files_changed == (
        "hello.txt",
    )


@pytest.mark.parametrize(
    ("capture", "code", "failure"),
    [
        ("err-quota2", 173, Failure.QUOTA),
        ("err-429", 173, Failure.QUOTA),
        ("err-529", 247, Failure.OVERLOAD),
        ("err-500", 244, Failure.OVERLOAD),
    ],
)
def test_gemini_errors_are_classified(capture, code, failure):
    result = outcome(GeminiSpec(), read(f"gemini/{capture}.stream-json.jsonl"), code=code)
    assert result.failure is failure, result.error


def test_gemini_quota_with_empty_stdout_is_read_from_stderr():
    result = outcome(
        GeminiSpec(), "", stderr=read("gemini/err-quota2.text-mode.stderr.txt"), code=1
    )
    assert result.failure is Failure.QUOTA and "daily quota" in result.error


# -- opencode ------------------------------------------------------------------------------


def test_opencode_success():
    result = outcome(OpencodeSpec(), read("opencode/ok.json-events.jsonl"))
    assert result.ok and result.final_text == DONE
    assert (result.usage.input_tokens, result.usage.output_tokens) == (1800, 60)
    assert result.cost_usd == 0


def test_opencode_rate_limit_is_quota_with_a_reset():
    result = outcome(OpencodeSpec(), read("opencode/err-429.json-events.jsonl"), code=1)
    assert result.failure is Failure.QUOTA and result.quota_resets_at is not None


# -- aider ---------------------------------------------------------------------------------


def test_aider_success_is_read_from_text():
    result = outcome(AiderSpec(), read("aider/ok.stdout.txt"))
    assert result.ok
    assert result.files_changed == ("hello.txt",)
    assert (result.usage.input_tokens, result.usage.output_tokens) == (649, 9)
    assert result.usage.model == "openai/fake-model" and result.cost_usd == pytest.approx(0.00067)
    assert "hi" in result.final_text and "Aider v" not in result.final_text


@pytest.mark.parametrize("capture", ["err-429", "err-quota"])
def test_aider_rate_limits_are_quota_although_it_exits_0(capture):
    result = outcome(AiderSpec(), read(f"aider/{capture}.stdout.txt"), code=0)
    assert result.failure is Failure.QUOTA, result.error


# -- shared --------------------------------------------------------------------------------


def test_unknown_events_and_fields_are_ignored():
    noise = (
        '{"type":"mystery","x":1}\n{"type":"result","is_error":false,"result":"ok",'
        '"new_field":{"a":[1]},"usage":{"input_tokens":"lots"}}\nnot json\n[1,2]\n'
    )
    parsed = ClaudeSpec().parse(noise)
    assert parsed.final_text == "ok" and parsed.usage.input_tokens == 0
    for spec in (CodexSpec(), GeminiSpec(), OpencodeSpec(), AiderSpec()):
        spec.parse(noise)  # never raises


def test_classification_of_plain_messages():
    assert classify_error("You’ve hit your usage limit. … try again at 5:08 AM.") is Failure.QUOTA
    assert (
        classify_error("Selected model is at capacity. Please try a different model.")
        is Failure.OVERLOAD
    )
    assert classify_error("permission denied: /etc/passwd") is None
    now = datetime(2026, 11, 30, 3, 0, tzinfo=UTC)
    assert reset_time("Please try again in 90s.", now) == datetime(
        2026, 11, 30, 3, 1, 30, tzinfo=UTC
    )


@pytest.mark.parametrize(
    "spec", [ClaudeSpec(), CodexSpec(), GeminiSpec(), OpencodeSpec(), AiderSpec()]
)
def test_a_prompt_with_dashes_and_metacharacters_stays_one_literal_argument(spec):
    prompt = "--help; rm -rf / $(id) `x` | & > out"
    request = AgentRequest(
        task_id="T-1",
        run_id="R-1",
        role="dev",
        stage=TaskState.IMPLEMENTING,
        prompt=prompt,
        cwd=Path("/tmp"),
        model="m",
        args=("--extra",),
    )
    argv = spec.build_argv(request, PromptArg(text=prompt))
    literal = [a for a in argv if prompt in a]
    assert len(literal) == 1
    assert (literal[0] == prompt and argv[argv.index(prompt) - 1] == "--") or literal[0].endswith(
        "=" + prompt
    )
    assert "--extra" in argv


@pytest.mark.parametrize(
    ("spec", "version", "supported", "newer"),
    [
        (ClaudeSpec(), "2.1.197", True, False),
        (ClaudeSpec(), "2.5.0", True, True),
        (ClaudeSpec(), "1.0.3", False, False),
        (CodexSpec(), None, False, False),
    ],
)
def test_versions_against_the_supported_range(spec, version, supported, newer):
    ok, note = spec.check_version(version)
    assert ok is supported and ("newer" in note) is newer


def test_files_changed_are_relative_to_the_worktree():
    stdout = read("codex/apply-patch.jsonl").replace("/scratch/repo-codex-A6iP", "/tmp")
    assert outcome(CodexSpec(), stdout).files_changed == ("hello.txt",)


# -- tokens per model request ----------------------------------------------------------------


def per_request(parsed) -> list[tuple[int, int, int]]:
    """(input, cached input, output) of each request a parse found."""
    return [(r.input_tokens, r.cache_read_tokens, r.output_tokens) for r in parsed.requests]


def test_claude_counts_each_message_once_though_it_prints_one_event_per_block():
    # Three `assistant` events: the first message (text, then a tool call) and the answer.
    parsed = ClaudeSpec().parse(read("claude/write-tool.stream.jsonl"))
    assert per_request(parsed) == [(1200, 0, 1), (1200, 0, 1)]
    assert {r.model for r in parsed.requests} == {"claude-sonnet-4-5"}


def test_claude_relayed_api_error_is_no_request():
    # Claude Code's own "<synthetic>" message about the error reached no model.
    assert ClaudeSpec().parse(read("claude/err-429.stream.jsonl")).requests == ()


def test_claude_requests_carry_cached_input_apart():
    line = (
        '{"type":"assistant","message":{"id":"m1","model":"claude-x","content":[],'
        '"usage":{"input_tokens":10,"cache_read_input_tokens":900,'
        '"cache_creation_input_tokens":50,"output_tokens":7}}}'
    )
    parsed = ClaudeSpec().parse(line)
    assert per_request(parsed) == [(10, 900, 7)]
    assert parsed.requests[0].cache_write_tokens == 50


def test_codex_reports_one_usage_per_turn():
    parsed = CodexSpec().parse(read("codex/exec-shell.jsonl"))
    assert per_request(parsed) == [(3000, 0, 80)]
    two_turns = read("codex/apply-patch.jsonl") + read("codex/exec-shell.jsonl")
    assert len(CodexSpec().parse(two_turns).requests) == 2


def test_gemini_reports_its_tokens_per_model():
    parsed = GeminiSpec().parse(read("gemini/ok.stream-json.jsonl"))
    assert per_request(parsed) == [(1000, 0, 20), (2000, 0, 40)]
    assert [r.model for r in parsed.requests] == ["gemini-3.5-flash-lite", "gemini-3.8-flash"]


def test_opencode_reports_each_step_and_sums_them():
    parsed = OpencodeSpec().parse(read("opencode/ok.json-events.jsonl"))
    assert per_request(parsed) == [(900, 0, 30), (900, 0, 30)]
    assert (parsed.usage.input_tokens, parsed.usage.output_tokens) == (1800, 60)


def test_aider_reports_each_exchange_it_printed():
    parsed = AiderSpec().parse(read("aider/ok.stdout.txt"))
    assert per_request(parsed) == [(649, 0, 9)] and parsed.requests[0].model == "openai/fake-model"
    again = read("aider/ok.stdout.txt") + "\nTokens: 1.2k sent, 15 received.\n"
    assert per_request(AiderSpec().parse(again)) == [(649, 0, 9), (1200, 0, 15)]


def test_the_requests_reach_the_agent_result():
    result = outcome(ClaudeSpec(), read("claude/write-tool.stream.jsonl"))
    assert len(result.requests) == 2 and result.usage.input_tokens == 2400
