"""The desktop notification the cockpit sends when a human is needed and no one is looking.

It is an escape sequence written to the terminal, not `notify-send`: the cockpit usually
runs over SSH, and `notify-send` would raise the notification on the server, where no one
sits, while an escape sequence travels with the screen to the terminal the operator uses.
Terminals disagree on which one: iTerm2 takes OSC 9; GNOME Terminal and the other VTE
terminals, foot, WezTerm, Ghostty and urxvt take OSC 777. A terminal that knows neither
ignores it (they are OSC strings, which terminals skip whole). Inside tmux the sequence
is wrapped to pass through to the outer terminal (tmux's `allow-passthrough on`).

No Textual here: the app writes what `notification` returns next to its bell.
"""

from __future__ import annotations

from collections.abc import Mapping

from core.domain.text import printable

MAX_BODY = 200  # characters: a notification is a pointer to the cockpit, not the story


def _plain(text: str, limit: int) -> str:
    """Stored text made safe inside an OSC string: escaped, one line, no `;` (a separator)."""
    flat = printable(" ".join(text.split())).replace(";", ",")
    return flat if len(flat) <= limit else flat[: limit - 1] + "…"


def notification(title: str, body: str, env: Mapping[str, str]) -> str:
    """The escape sequence that shows `title` and `body` as a desktop notification on the
    terminal `env` describes (LC_TERMINAL crosses SSH; TERM_PROGRAM names a local one)."""
    title, body = _plain(title, 60), _plain(body, MAX_BODY)
    if "iTerm" in env.get("LC_TERMINAL", "") + env.get("TERM_PROGRAM", ""):
        sequence = f"\x1b]9;{title}: {body}\x07"
    else:
        sequence = f"\x1b]777;notify;{title};{body}\x07"
    if env.get("TMUX"):
        sequence = "\x1bPtmux;" + sequence.replace("\x1b", "\x1b\x1b") + "\x1b\\"
    return sequence
