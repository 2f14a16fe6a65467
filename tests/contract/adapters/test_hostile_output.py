"""Whatever an agent prints, each reader of it parses it or fails cleanly: the stage answer's
parser says why (AnswerInvalid), the CLIs' parsers and the transcript never raise, and no
count or number leaves them that the stores could not keep. Arbitrary text and bytes,
events of every shape the readers look for with arbitrary values, and JSON nested far
deeper than the decoder's recursion can go."""

from __future__ import annotations

import json
import math
import re
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from adapters.parsing import MAX_COUNT, json_lines, reset_time
from adapters.registry import builtin_specs
from adapters.transcript import Transcript, as_text, render, render_line
from core.domain import agent_json
from core.domain.answers import MAX_ANSWER_CHARS, OUTPUTS, extract_json, parse_answer
from core.domain.models import Usage
from core.errors import AnswerInvalid

SPECS = builtin_specs()
# What `core.domain.text.printable` leaves: no control character but line feed and tab.
UNSAFE = re.compile("[\x00-\x08\x0b-\x1f\x7f-\x9f\ud800-\udfff\u2028\u2029\u202a-\u202e]")
FAST = settings(
    max_examples=150,
    deadline=None,  # a shared 2-core machine: time is not what is checked
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
)

# The keys and event types the readers look for, so that arbitrary values reach them.
KEYS = (
    "type", "subtype", "message", "content", "text", "role", "item", "part", "state", "usage",
    "stats", "error", "result", "is_error", "num_turns", "total_cost_usd", "tool_name",
    "parameters", "tool_id", "status", "output", "sessionID", "session_id", "model",
    "modelUsage", "tools", "name", "input", "changes", "exit_code", "aggregated_output",
    "arguments", "server", "tool", "query", "thinking", "tokens", "cache", "cost", "models",
    "rate_limit_info", "resetsAt", "input_tokens", "output_tokens", "cached_input_tokens",
    "prompt_tokens", "cache_read_input_tokens", "total_tokens", "cached", "outputTokens",
    "data", "path", "kind", "file_path", "filePath", "id", "errors",
)  # fmt: skip
TYPES = (
    "system", "init", "assistant", "user", "result", "tool_use", "tool_result", "text",
    "message", "error", "item.started", "item.completed", "turn.completed", "turn.failed",
    "thread.started", "step_finish", "rate_limit_event", "command_execution", "file_change",
    "mcp_tool_call", "web_search", "agent_message", "reasoning",
)  # fmt: skip

scalars = (
    st.none()
    | st.booleans()
    | st.integers()
    | st.integers(min_value=10**300, max_value=10**4000)  # past a float, past a 64-bit column
    | st.floats(allow_nan=True, allow_infinity=True)
    | st.sampled_from(TYPES)
    | st.text(max_size=40)
)
values = st.recursive(
    scalars,
    lambda inner: (
        st.lists(inner, max_size=4)
        | st.dictionaries(st.sampled_from(KEYS) | st.text(max_size=8), inner, max_size=5)
    ),
    max_leaves=25,
)
events = st.builds(
    lambda kind, rest: {**rest, "type": kind},
    st.sampled_from(TYPES),
    st.dictionaries(st.sampled_from(KEYS), values, max_size=8),
)


def _captured_events() -> list[dict[str, Any]]:
    """Every event the real CLIs printed in tests/contract/adapters/captures, and the scripted agent's."""
    found: list[dict[str, Any]] = []
    for path in sorted((Path(__file__).parent / "captures").rglob("*.json*")):
        for line in path.read_text(errors="replace").splitlines():
            try:
                event = json.loads(line)
            except ValueError:
                continue
            if isinstance(event, dict) and "type" in event:
                found.append(event)
    scripted = {"type": "result", "subtype": "success", "is_error": False, "result": "ok"}
    usage = {"input_tokens": 3, "output_tokens": 1}
    return [*found, {**scripted, "model": "scripted-1", "session_id": "s-1", "usage": usage}]


CAPTURED = _captured_events()


def _places(value: Any, path: tuple[Any, ...] = ()) -> list[tuple[Any, ...]]:
    """The path of every value inside `value`, its own first."""
    inner: list[tuple[Any, ...]] = []
    if isinstance(value, dict):
        inner = [p for k, v in value.items() for p in _places(v, (*path, k))]
    elif isinstance(value, list):
        inner = [p for i, v in enumerate(value) for p in _places(v, (*path, i))]
    return [path, *inner]


@st.composite
def mutated(draw: st.DrawFn) -> dict[str, Any]:
    """A real CLI's event with values replaced or keys added: the shapes the parsers expect,
    holding what they do not."""
    event = json.loads(json.dumps(draw(st.sampled_from(CAPTURED))))
    for _ in range(draw(st.integers(1, 4))):
        path = draw(st.sampled_from(_places(event)[1:] or [("type",)]))
        *at, last = path
        holder = event
        for step in at:
            holder = holder[step]
        if isinstance(holder, dict) and draw(st.booleans()):
            last = draw(st.sampled_from(KEYS))  # a key the readers look for, added or replaced
        holder[last] = draw(values)
    return event


@st.composite
def nested(draw: st.DrawFn) -> str:
    """JSON nested up to 300,000 deep, bare, as an event, or as a fenced answer; closed or not."""
    depth = draw(st.integers(1, 300_000))
    opening = draw(st.sampled_from(["[", '{"a":', '{"summary":[']))
    closing = {"[": "]", '{"a":': "}", '{"summary":[': "]}"}[opening]
    body = opening * depth + "1" + (closing * depth if draw(st.booleans()) else "")
    shape = draw(st.sampled_from(["bare", "event", "string", "fenced"]))
    if shape == "event":
        return '{"type": "assistant", "message": {"content": ' + body + "}}"
    if shape == "string":  # the deep text inside a result's string: a final answer
        return json.dumps({"type": "result", "subtype": "success", "result": body})
    if shape == "fenced":
        return f"Done.\n\n```json\n{body}\n```\n"
    return body


def lines_of(parts: list[str]) -> str:
    return "\n".join(parts) + "\n"


agent_text = (
    st.text()
    | st.binary().map(lambda b: b.decode("utf-8", "replace"))
    | st.lists(events.map(json.dumps), max_size=8).map(lines_of)
    | st.lists(mutated().map(json.dumps), min_size=1, max_size=6).map(lines_of)
    | st.lists(nested() | events.map(json.dumps) | st.text(max_size=30), max_size=4).map(lines_of)
    | nested()
)


def _in_bounds(usage: Usage) -> bool:
    counts = (
        usage.input_tokens,
        usage.output_tokens,
        usage.cache_read_tokens,
        usage.cache_write_tokens,
    )
    return all(type(n) is int and 0 <= n <= MAX_COUNT for n in counts)


@FAST
@given(text=agent_text)
def test_each_clis_parser_reads_anything_without_raising_and_within_the_stores_bounds(text):
    for spec in SPECS:
        output = spec.parse(text)
        assert _in_bounds(output.usage) and all(map(_in_bounds, output.requests))
        assert output.cost_usd is None or math.isfinite(output.cost_usd)
        # What a failed run's error is then read for: a quota, its reset, an overload.
        spec.detect_quota(output, text)
        spec.detect_overload(output, text)


@FAST
@given(text=agent_text)
def test_json_lines_gives_the_objects_it_can_read_and_skips_the_rest(text):
    assert all(isinstance(event, dict) for event in json_lines(text))


@FAST
@given(text=agent_text | st.text().map(lambda t: f"rate limit: try again in {t}"))
def test_a_reset_time_is_a_moment_or_none(text):
    found = reset_time(text)
    assert found is None or isinstance(found, datetime)


@FAST
@given(text=agent_text, stage=st.sampled_from(sorted(OUTPUTS, key=str)))
def test_a_stage_answer_parses_or_says_why_it_did_not(text, stage):
    said = None
    try:
        answer = parse_answer(stage, text)
    except AnswerInvalid as exc:
        said = exc.message
    else:
        assert answer.question or isinstance(answer, OUTPUTS[stage])
    assert said is None or said.startswith(f"{stage} output: ")


@FAST
@given(text=agent_text)
def test_extract_json_gives_an_object_or_a_value_error(text):
    try:
        assert isinstance(extract_json(text), dict)
    except ValueError:
        pass


@FAST
@given(text=agent_text, cuts=st.lists(st.integers(0, 400), max_size=6))
def test_the_transcript_renders_anything_as_lines_that_cannot_act_on_a_terminal(text, cuts):
    transcript, entries, at = Transcript(), [], 0
    for cut in cuts:  # the output in the chunks it arrived in
        entries += transcript.feed(text[at : at + cut])
        at += cut
    entries += [*transcript.feed(text[at:]), *transcript.close()]
    whole = render(text)
    assert [as_text(e) for e in entries] == [as_text(e) for e in whole]
    assert not any(UNSAFE.search(e.text) for e in whole)


@pytest.mark.parametrize("depth", [1_000, 200_000])
@pytest.mark.parametrize("opening", ["[", '{"a":'])
def test_json_nested_far_deeper_than_the_stack_is_refused_with_its_depth(depth, opening):
    text = opening * depth + "]" * depth
    with pytest.raises(agent_json.JsonRefused, match=f"nested {depth:,} levels deep"):
        agent_json.loads(text)
    assert render_line(text)[0].text.startswith(opening * 5)  # shown as the text it is
    assert json_lines(text) == []


def test_json_at_the_depth_bound_is_read_and_brackets_in_strings_do_not_count():
    depth = agent_json.MAX_DEPTH
    assert agent_json.loads("[" * depth + "]" * depth) is not None
    assert agent_json.loads(json.dumps(["[" * 10_000, "{" * 10_000])) == [
        "[" * 10_000,
        "{" * 10_000,
    ]
    assert agent_json.nesting(r'["\"[[[", {"a": [1]}]') == 3


def test_a_deep_answer_fails_its_stage_naming_the_depth():
    deep = '{"summary": "x", "deep": ' + "[" * 200_000 + "]" * 200_000 + "}"
    for text in (deep, f"Done.\n\n```json\n{deep}\n```\n"):
        with pytest.raises(AnswerInvalid, match="nested 200,001 levels deep; at most 100"):
            parse_answer(next(iter(OUTPUTS)), text)


def test_an_answer_over_its_bound_fails_naming_the_bound():
    text = '{"summary": "' + "x" * MAX_ANSWER_CHARS + '"}'
    with pytest.raises(AnswerInvalid, match=f"at most {MAX_ANSWER_CHARS:,} are read"):
        parse_answer(next(iter(OUTPUTS)), text)


def test_fenced_blocks_are_found_in_linear_time():
    """Unclosed opening fences, each of which a lazy pattern would scan to the end from."""
    text = "```\na" * 200_000
    with pytest.raises(ValueError, match="no JSON object"):
        extract_json(text)
    assert extract_json('a\n```json\n{}\n```\n```\n{"b": 1}\n```') == {"b": 1}


def test_counts_and_numbers_no_store_can_keep_are_read_as_none():
    huge = 10**30
    result = {"type": "result", "subtype": "success", "result": "ok", "is_error": False}
    usage = {"input_tokens": huge, "output_tokens": 5, "cache_read_input_tokens": -1}
    line = json.dumps({**result, "usage": usage, "total_cost_usd": 10**400})
    output = next(s for s in SPECS if s.name == "claude").parse(line)
    assert (output.usage.input_tokens, output.usage.output_tokens) == (0, 5)
    assert output.cost_usd is None
    aider = next(s for s in SPECS if s.name == "aider")
    said = f"Tokens: {'9' * 400}k sent, 1.2.3 received. Cost: $1e999 message\n"
    assert aider.parse(said).usage == Usage()
    assert reset_time("rate limit: try again in 99999999999999999999 hours") is None
    assert reset_time("try again in 2 s", datetime(2030, 1, 1, tzinfo=UTC)) == datetime(
        2030, 1, 1, 0, 0, 2, tzinfo=UTC
    )
