"""Text from outside T25: bounded and clean at the door, harmless on the way out.

Titles, descriptions, actors, reasons and answers are typed by operators and sent by
clients of `t25 serve`; T25 stores them, prints them on terminals, writes them into the
audit log and into agents' prompts. At the door, `checked` (and the named bounds below)
refuses what no person means to type: text over its bound, and characters that a
terminal, a prompt or a line-oriented reader would take for structure rather than
words —

    C0 and C1 controls and DEL      escape sequences, NUL, carriage returns, NEL
    lone surrogates                 not encodable as UTF-8
    U+2028, U+2029                  line and paragraph separators
    bidirectional overrides         text that displays in another order than it reads

Multi-line text (descriptions, reasons, answers) keeps `\\n` and `\\t`; a title and an
actor are one line. On the way out, `printable` escapes the same characters in text that
was stored before these checks, or that T25 never checked (agent and check output), so it
can reach an operator's terminal without acting on it. Refusals name the character and
its position, never echo the text itself.
"""

from __future__ import annotations

import re

from core.errors import InvalidInput

MAX_TITLE = 200
MAX_DESCRIPTION = 20_000
MAX_ACTOR = 100
MAX_REASON = 10_000  # a reason, a comment or an answer
# A path in the repository an operator names (a merge's protected paths), and how many one
# decision may name: bounded so that a merge's body, its reason at its bound too, stays within
# what `t25 serve` takes (t25_tui.api.gate.BODY_CAP); a change of more files than this is
# beyond limits.max_files_changed's default twice over.
MAX_PATH = 200
MAX_PATHS = 50

_UNSAFE = re.compile(
    "[\x00-\x08\x0b-\x1f\x7f-\x9f\ud800-\udfff\u2028\u2029"
    "\u061c\u200e\u200f\u202a-\u202e\u2066-\u2069]"
)
_UNSAFE_ONE_LINE = re.compile(f"[\n\t]|{_UNSAFE.pattern}")


def checked(
    text: str, *, what: str, limit: int, multiline: bool = False, required: bool = False
) -> str:
    """`text` as it may enter T25 (a title stripped, line ends normalised), or InvalidInput."""
    if multiline:
        text = text.replace("\r\n", "\n")
    else:
        text = text.strip()
    if required and not text.strip():
        raise InvalidInput(f"{what} cannot be empty")
    if len(text) > limit:
        raise InvalidInput(
            f"{what} is {len(text):,} characters long; at most {limit:,} are kept",
            hint=f"shorten the {what}",
        )
    found = (_UNSAFE if multiline else _UNSAFE_ONE_LINE).search(text)
    if found:
        kind = "a line break" if found.group() in "\n\t" else "a control character"
        raise InvalidInput(
            f"{what} holds {kind} (U+{ord(found.group()):04X} at position {found.start() + 1})",
            hint=f"the {what} must be plain text" + ("" if multiline else " on one line"),
        )
    return text


def title(text: str) -> str:
    return checked(text, what="title", limit=MAX_TITLE, required=True)


def description(text: str) -> str:
    return checked(text, what="description", limit=MAX_DESCRIPTION, multiline=True)


def actor(text: str) -> str:
    return checked(text, what="actor", limit=MAX_ACTOR, required=True)


def reason(text: str, *, what: str = "reason", required: bool = False) -> str:
    return checked(text, what=what, limit=MAX_REASON, multiline=True, required=required)


def path(text: str) -> str:
    return checked(text, what="path", limit=MAX_PATH, required=True)


def printable(text: str, *, multiline: bool = False) -> str:
    """`text` with every character `checked` would refuse shown as an escape (`\\x1b`)."""
    pattern = _UNSAFE if multiline else _UNSAFE_ONE_LINE
    return pattern.sub(_escape, text)


def _escape(found: re.Match[str]) -> str:
    code = ord(found.group())
    return f"\\x{code:02x}" if code < 0x100 else f"\\u{code:04x}"
