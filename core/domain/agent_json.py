"""JSON an agent printed: read within bounds, or refused with the reason.

Agents and their CLIs print what they like: a stage answer, an event line, a usage report.
`json.loads` recurses once per level of nesting, so text nested a few thousand levels deep
raises `RecursionError` rather than `ValueError`, and a huge text builds a huge value. Every
reading of agent output goes through `loads`, which refuses both before decoding, cheaply —
text over `MAX_CHARS`, and text whose arrays and objects nest deeper than `MAX_DEPTH` — and
turns whatever the decoder still raises into `JsonRefused`, a `ValueError`: a caller that
already skips what is not JSON skips this too. The real CLIs nest their events a few levels
deep (Claude Code's deepest capture: 6); a model's own tool arguments add a few more.
"""

from __future__ import annotations

import json
import re
from itertools import accumulate
from typing import Any

MAX_DEPTH = 100
# A run's result is read from at most 4 MiB of its stdout (adapters.process.PARSE_LIMIT).
MAX_CHARS = 4 * 2**20

# A JSON string, or the unterminated start of one (the decoder stops there). Brackets inside
# a string are not structure.
_STRING = re.compile(r'"[^"\\]*(?:\\.[^"\\]*)*"?', re.DOTALL)
_NOT_BRACKET = re.compile(r"[^\[\]{}]+")
_STEP = {"[": 1, "{": 1, "]": -1, "}": -1}


class JsonRefused(ValueError):
    """Agent text T25 will not decode: too long, or nested too deep."""


def nesting(text: str) -> int:
    """How deep the arrays and objects of JSON `text` nest, counted on the brackets outside
    strings at C speed: exact for valid JSON; for invalid JSON at least as deep as the
    decoder would go before it stopped."""
    brackets = _NOT_BRACKET.sub("", _STRING.sub("", text))
    return max(accumulate(map(_STEP.__getitem__, brackets)), default=0)


def loads(text: str, *, max_chars: int = MAX_CHARS) -> Any:
    """`json.loads(text)` for text an agent wrote. JsonRefused for text over `max_chars` or
    nested deeper than `MAX_DEPTH`, and for what the decoder still cannot take; a
    `json.JSONDecodeError` (a ValueError too) for text that is not JSON."""
    if len(text) > max_chars:
        raise JsonRefused(f"{len(text):,} characters long; at most {max_chars:,} are read")
    # Fewer brackets than the bound cannot nest past it: the usual case costs two counts.
    if text.count("[") + text.count("{") > MAX_DEPTH and (depth := nesting(text)) > MAX_DEPTH:
        raise JsonRefused(f"nested {depth:,} levels deep; at most {MAX_DEPTH} are read")
    try:
        return json.loads(text)
    except RecursionError:  # the stack was already deep when this was called
        raise JsonRefused("nested too deep to read here") from None
    except MemoryError:
        raise JsonRefused(f"{len(text):,} characters took more memory than there is") from None
