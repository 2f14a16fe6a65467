"""Agents' output rendered for a person, from each CLI's captured stream: messages, tool
calls with their arguments, results and errors, and never a raw JSON event."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from adapters.entries import Kind
from adapters.transcript import Transcript, as_text, render

CAPTURES = Path(__file__).parent / "captures"


def _text(name: str) -> list[str]:
    return [as_text(e) for e in render((CAPTURES / name).read_text())]


def test_claude_code_stream_json():
    assert _text("claude/bash-tool.stream.jsonl") == [
        "· session started · model claude-opus-4-8[1m] · 24 tools",
        "I'll create the file.",
        "→ Bash(command=\"printf '%s\\\\n' 'hi' > hello.txt\", description='Create hello.txt')",
        "  ← (Bash completed with no output)",
        "Done: created hello.txt containing hi.",
        "· finished: success · 2 turns · $0.0141",
    ]


def test_claude_code_error_result():
    lines = _text("claude/err-429.stream.jsonl")
    assert any(line.startswith("✗ error: API Error: Request rejected (429)") for line in lines)
    assert lines[-1].startswith("· finished: error")


def test_codex_exec_json():
    assert _text("codex/exec-shell.jsonl") == [
        "· session started",
        (
            "✗ error: Model metadata for `gpt-5-codex` not found. Defaulting to fallback "
            "metadata; this can degrade performance and cause issues."
        ),
        "→ shell(command='/bin/bash -lc \"printf \\'%s\\\\\\\\n\\' \\'hi\\' > hello.txt\"')",
        "  ← exit 0: (no output)",
        "Done: created hello.txt containing hi.",
        "· turn finished · tokens in 3000 out 80",
    ]
    assert "→ edit(add /scratch/repo-codex-A6iP/hello.txt)" in _text("codex/apply-patch.jsonl")
    assert _text("codex/err-429.jsonl")[-1] == (
        "✗ error: exceeded retry limit, last status: 429 Too Many Requests"
    )


def test_gemini_cli_stream_json():
    assert _text("gemini/ok-write_file.stream-json.jsonl") == [
        "· session started · model auto",
        "· user: create hello.txt containing hi",
        "→ write_file(file_path='hello.txt', content='hi')",
        "  ← success",
        "Done: created hello.txt containing hi.",
        "· finished: success · tokens in 3000 out 60",
    ]
    errors = _text("gemini/err-429.stream-json.jsonl")
    assert errors[-2].startswith("✗ error: [API Error: Resource has been exhausted")


def test_opencode_json_events():
    assert _text("opencode/ok.json-events.jsonl") == [
        "→ bash(command=\"printf '%s\\\\n' 'hi' > hello.txt\")",
        "  ← (no output)",
        "Done: created hello.txt containing hi.",
    ]
    assert _text("opencode/err-429.json-events.jsonl") == [
        "✗ error: APIError: Rate limit reached for requests. Please try again in 1s."
    ]


def test_aider_plain_text_is_kept_as_printed():
    text = (CAPTURES / "aider/ok.stdout.txt").read_text()
    assert _text("aider/ok.stdout.txt") == text.rstrip("\n").split("\n")
    assert all(e.kind is Kind.TEXT for e in render(text))


@pytest.mark.parametrize(
    "name",
    [
        "claude/write-tool.stream.jsonl",
        "claude/err-max-turns.stream.jsonl",
        "codex/err-usage.jsonl",
        "gemini/ok.stream-json.jsonl",
        "gemini/err-quota2.stream-json.jsonl",
    ],
)
def test_no_captured_event_is_shown_as_raw_json(name):
    lines = _text(name)
    assert lines and not any(line.startswith("{") for line in lines)


def test_a_long_result_and_long_arguments_are_abridged():
    long_output = "\n".join(f"line {n}" for n in range(50))
    events = [
        {"type": "assistant", "message": {"content": [
            {"type": "tool_use", "name": "Write", "input": {"content": "x" * 5000}},
        ]}},
        {"type": "user", "message": {"content": [
            {"type": "tool_result", "content": long_output},
        ]}},
    ]  # fmt: skip
    lines = _text_of("\n".join(json.dumps(e) for e in events) + "\n")
    assert len(lines[0]) < 120 and lines[0].endswith("…')")
    assert lines[1].splitlines()[-1].strip() == "… 44 more lines"


def test_an_event_split_across_chunks_is_read_whole_and_escapes_are_escaped():
    line = json.dumps({"type": "assistant", "text": "red \x1b[31m text"}) + "\n"
    transcript = Transcript()
    assert transcript.feed(line[:10]) == []
    (entry,) = transcript.feed(line[10:])
    assert entry.kind is Kind.MESSAGE and "\x1b" not in entry.text and "red" in entry.text
    assert transcript.feed("no newline at the end") == []
    assert [e.text for e in transcript.close()] == ["no newline at the end"]


def _text_of(text: str) -> list[str]:
    return [as_text(e) for e in render(text)]
