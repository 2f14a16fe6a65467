"""t25.yaml's `keys:`: the cockpit's commands on keys of your choosing.

`keys:` maps a cockpit command's id (the help screen shows each one's) to the key, or the
list of keys, that replace its defaults:

    keys:
      cost: f4
      decide: [a, ctrl+d]

Only keys a terminal sends the same way over SSH are accepted: a lowercase letter, a digit,
a punctuation mark, ctrl+letter, F1-F12, the arrows and a few named keys. A key may be
written as typed (`?`) or by its name (`question_mark`); it is kept as the name, the form
the cockpit binds (Textual's, which `tests/e2e/tui` holds this module to).

The commands belong to the cockpit, which core does not import: whoever loads the file
passes a source of them (`load_config(commands=...)`, as the command line does, asked for
only when the file has `keys:`), and then an unknown id or a key that would run two
commands in one place is refused with its line, like every other mistake in the file.
"""

from __future__ import annotations

import string
import unicodedata
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass
from typing import Annotated, Any

from pydantic import BeforeValidator

from core.config.source import show, unknown_name

# Named keys every terminal sends the same way.
_NAMED = frozenset(
    {
        *("up", "down", "left", "right", "home", "end", "pageup", "pagedown"),
        *("insert", "delete", "backspace", "enter", "escape", "space"),
        *(f"f{n}" for n in range(1, 13)),
    }
)
# ctrl+ these is another key on the wire (i is tab, j and m are enter, h is backspace), or
# the cockpit's toolkit keeps it (c interrupts, p opens the command palette).
_NOT_WITH_CTRL = frozenset("ijmhcp")
# How the toolkit names a few punctuation marks (the rest: their Unicode names).
_RENAMED = {
    "solidus": "slash",
    "reverse_solidus": "backslash",
    "commercial_at": "at",
    "hyphen_minus": "minus",
    "plus_sign": "plus",
    "low_line": "underscore",
}
KEYS_HINT = "the cockpit's help screen (? in `t25 tui`) lists each command's id and keys"
EXPECTED = (
    "expected a key that works over SSH: a lowercase letter, digit or punctuation mark, "
    "ctrl+letter, f1-f12, an arrow (up, down, left, right) or one of "
    "home, end, pageup, pagedown, insert, delete, backspace, enter, escape, space"
)


def character_key(char: str) -> str:
    """The name of the key that types `char`: `?` -> `question_mark`, `a` -> `a`."""
    if char.isalnum():
        return char
    name = unicodedata.name(char).lower().replace("-", "_").replace(" ", "_")
    return _RENAMED.get(name, name)


_PUNCTUATION = frozenset(character_key(char) for char in string.punctuation)


def key_name(written: str) -> str:
    """A key as the cockpit binds it (`?` -> `question_mark`, `F4` -> `f4`); ValueError for
    a key a terminal may not send as itself."""
    key = written.strip()
    name = _typed_key(key) if len(key) == 1 else _named_key(key.lower())
    if name is None:
        raise ValueError(f"{EXPECTED}, got {show(written)}")
    return name


def _typed_key(char: str) -> str | None:
    """The key that types `char`, if it is a lowercase letter, a digit or punctuation."""
    if char in string.ascii_uppercase:
        raise ValueError(f"a capital letter needs shift; write {char.lower()!r}")
    if char in string.ascii_lowercase or char in string.digits or char in string.punctuation:
        return character_key(char)
    return None


def _named_key(key: str) -> str | None:
    """`key` if it names a key that survives SSH: a named key, punctuation, ctrl+letter."""
    if key in _NAMED or key in _PUNCTUATION:
        return key
    modifier, _, base = key.partition("+")
    if modifier != "ctrl" or len(base) != 1 or base not in string.ascii_lowercase:
        return None
    if base in _NOT_WITH_CTRL:
        raise ValueError(f"{key} is taken by the terminal or the cockpit; choose another")
    return key


def _keys(value: Any) -> list[str]:
    """A `keys:` entry's value: one key, or a list of them, each checked and named."""
    if isinstance(value, bool) or not isinstance(value, str | int | list):
        raise ValueError(f"expected a key or a list of keys, got {show(value)}")
    written = value if isinstance(value, list) else [value]
    if not written:
        raise ValueError("expected at least one key")
    names: list[str] = []
    for key in written:
        name = key_name(_one_key(key))
        if name in names:
            raise ValueError(f"{show(key)} is listed twice")
        names.append(name)
    return names


def _one_key(key: Any) -> str:
    """One key as written: text, or a digit YAML read as a number (`detail.history: 1`)."""
    if isinstance(key, int) and not isinstance(key, bool) and 0 <= key <= 9:
        return str(key)
    if not isinstance(key, str):
        raise ValueError(f"expected a key, got {show(key)}")
    if "," in key.strip() and key.strip() != ",":
        raise ValueError(f"write several keys as a list, such as [{key}], got {show(key)}")
    return key


Keys = Annotated[list[str], BeforeValidator(_keys)]


@dataclass(frozen=True)
class Bindable:
    """A command `keys:` may move, as the face that owns it declares it."""

    keys: tuple[str, ...]  # its default keys, named as `key_name` names them
    bound_in: tuple[str, ...]  # where its keys work ("the board"); there a key runs one command


def keymap_problems(
    keys: Mapping[str, Sequence[str]], commands: Mapping[str, Bindable]
) -> Iterator[tuple[str, str]]:
    """(command id, what is wrong) for each `keys:` entry that cannot be bound as written."""
    in_effect = {name: tuple(keys.get(name, c.keys)) for name, c in commands.items()}
    for name, chosen in keys.items():
        if name not in commands:
            yield name, unknown_name("command", name, sorted(commands))
            continue
        for key in chosen:
            for other, where in _also_bound(key, name, in_effect, commands):
                clash = f"{show(key)} already runs {other} on {where}"
                yield name, f"{clash}; a key runs one command in a place: give one another"


def _also_bound(
    key: str, name: str, in_effect: Mapping[str, tuple[str, ...]], commands: Mapping[str, Bindable]
) -> Iterator[tuple[str, str]]:
    """(command, place) for each other command `key` runs where command `name` works."""
    places = commands[name].bound_in
    for other, keys_of_other in in_effect.items():
        shared = [place for place in commands[other].bound_in if place in places]
        if other != name and shared and key in keys_of_other:
            yield other, shared[0]
