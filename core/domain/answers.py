"""What each stage's agent must answer, and the strict parser that checks it.

An agent's final message must hold one JSON object (best inside a ```json fence) of its
stage's shape. Code reads it; the model's word is only data: a review's own "verdict"
is kept but ignored, T25 recomputes it from the findings. Anything that does
not parse fails the task with an error naming what was wrong — it is never retried.

Any stage may instead set `question` when it cannot go on without a human answer.

The message is the agent's to write, so it is read within bounds: at most
`MAX_ANSWER_CHARS`, its JSON through `core.domain.agent_json` (nested at most
`agent_json.MAX_DEPTH` deep), in time linear in its length. What is beyond them fails the
task with the bound it broke.
"""

from __future__ import annotations

import functools
import json
import re
from collections.abc import Iterator
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError

from core.domain import agent_json
from core.domain.models import TaskState
from core.errors import AnswerInvalid

Risk = Literal["low", "medium", "high"]
Severity = Literal["blocker", "major", "minor", "nit"]
SEVERITIES: tuple[Severity, ...] = ("blocker", "major", "minor", "nit")


class StageAnswer(BaseModel):
    # Unknown fields are dropped (CLIs and models add their own); known ones are strict.
    model_config = ConfigDict(frozen=True, extra="ignore", strict=True, defer_build=True)

    question: str | None = Field(None, description="set only when a human must answer first")


class SpecAnswer(StageAnswer):
    summary: str = Field(min_length=1, description="what the change is, in a paragraph")
    acceptance_criteria: list[str] = Field(min_length=1, description="testable statements")
    out_of_scope: list[str] = []


class PlanAnswer(StageAnswer):
    steps: list[str] = Field(min_length=1, description="ordered implementation steps")
    files: list[str] = Field(description="paths the implementation will touch")
    risk: Risk = Field(description="low, medium or high")
    rationale: str = Field(min_length=1, description="why this plan, and why this risk")


class DevAnswer(StageAnswer):
    summary: str = Field(min_length=1, description="what was changed")
    files_changed: list[str] = []


class QAAnswer(StageAnswer):
    summary: str = Field(min_length=1, description="what the check results mean")
    concerns: list[str] = []


class Finding(BaseModel):
    model_config = ConfigDict(frozen=True, extra="ignore", strict=True, defer_build=True)

    severity: Severity
    message: str = Field(min_length=1)
    file: str | None = None
    line: int | None = Field(None, ge=0)


class ReviewAnswer(StageAnswer):
    findings: list[Finding] = Field(description="every problem found; [] when none")
    summary: str = ""
    verdict: str | None = Field(None, description="ignored: T25 decides from findings")


class DocsAnswer(StageAnswer):
    summary: str = Field(min_length=1, description="what documentation changed")
    files: list[str] = []


OUTPUTS: dict[TaskState, type[StageAnswer]] = {
    TaskState.SPEC: SpecAnswer,
    TaskState.PLAN: PlanAnswer,
    TaskState.IMPLEMENTING: DevAnswer,
    TaskState.QA: QAAnswer,
    TaskState.REVIEW: ReviewAnswer,
    TaskState.DOCS: DocsAnswer,
}

# A fenced block: an opening fence (```, or ```json) ending its line, and the first closing
# fence at the start of a later line. Two patterns searched in turn rather than one with a
# lazy body, which would rescan the rest of the text from every unclosed opening fence.
_OPENING = re.compile(r"```(?:json)?[ \t]*\n")
_CLOSING = re.compile(r"\n[ \t]*```")
# A final message longer than this is not read: no stage's answer comes near it.
MAX_ANSWER_CHARS = 2**20


def extract_json(text: str) -> dict[str, Any]:
    """The JSON object in an agent's final message: the last fenced block, else the text
    itself, else the last balanced {...} in it. A ValueError says why there is none: what
    did not parse, or the bound (`agent_json`) the JSON broke."""
    if len(text) > MAX_ANSWER_CHARS:
        raise ValueError(
            f"the final message is {len(text):,} characters long; "
            f"at most {MAX_ANSWER_CHARS:,} are read"
        )
    candidates = _fenced(text)[::-1]
    candidates.append(text.strip())
    candidates += _balanced_objects(text)[::-1]
    refused: agent_json.JsonRefused | None = None
    for candidate in candidates:
        try:
            value = agent_json.loads(candidate)
        except agent_json.JsonRefused as exc:
            refused = refused or exc
            continue
        except ValueError:
            continue
        if isinstance(value, dict):
            return value
    if refused is not None:
        raise ValueError(f"the JSON in the final message is {refused}")
    raise ValueError("no JSON object found in the final message")


def _fenced(text: str) -> list[str]:
    """The body of every fenced block of `text`, in order."""
    found, at = [], 0
    while opening := _OPENING.search(text, at):
        closing = _CLOSING.search(text, opening.end())
        if closing is None:  # no later opening fence has a closing one either
            break
        found.append(text[opening.end() : closing.start()])
        at = closing.end()
    return found


def _balanced_objects(text: str) -> list[str]:
    """Every outermost `{...}` of `text`, braces inside JSON strings not counted."""
    found, depth, start = [], 0, -1
    for i, ch in _outside_strings(text):
        if ch == "{":
            start = i if depth == 0 else start
            depth += 1
        elif ch == "}" and depth:
            depth -= 1
            if depth == 0:
                found.append(text[start : i + 1])
    return found


def _outside_strings(text: str) -> Iterator[tuple[int, str]]:
    """The characters of `text` outside JSON strings, with their positions."""
    in_str = escaped = False
    for i, ch in enumerate(text):
        if not in_str:
            in_str = ch == '"'
            if not in_str:
                yield i, ch
        elif escaped:
            escaped = False
        elif ch == "\\":
            escaped = True
        elif ch == '"':
            in_str = False


def parse_answer(stage: TaskState, text: str) -> StageAnswer:
    """Parse a stage's final message into its model; OutputInvalid says what was wrong."""
    model = OUTPUTS[stage]
    try:
        data = extract_json(text)
        question = data.get("question")
        if isinstance(question, str) and question.strip():
            return StageAnswer(question=question.strip())  # asking needs nothing else
        return model.model_validate(data)
    except ValidationError as exc:
        first = exc.errors()[0]
        where = ".".join(str(p) for p in first["loc"]) or "(top level)"
        more = f" (and {exc.error_count() - 1} more)" if exc.error_count() > 1 else ""
        raise AnswerInvalid(f"{stage} output: {where}: {first['msg']}{more}") from None
    except ValueError as exc:
        raise AnswerInvalid(f"{stage} output: {exc}") from None
    except (RecursionError, MemoryError) as exc:  # beyond the bounds, and still the answer's
        raise AnswerInvalid(f"{stage} output: could not be read ({type(exc).__name__})") from None


@functools.cache  # pydantic builds a schema anew each time: ~2 ms of every prompt
def answer_schema(stage: TaskState) -> str:
    """The JSON schema a stage's answer must follow, for its prompt."""
    return json.dumps(OUTPUTS[stage].model_json_schema(), indent=2)
