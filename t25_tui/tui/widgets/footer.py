"""The cockpit's footer: Textual's Footer, made again once for what changed, and only where
it shows.

Textual's Footer mounts a widget per key each time its screen's keys may have changed (the
focus moved, a screen was pushed over it or taken off), once per change even when several
come before the next frame, and also while another screen hides it (textual 8.2.8). Opening
a task's log from the board made the footers six times, three of them the board's own behind
the detail screen. Here a footer is made again at most once a frame, not while hidden (its
screen's keys are refreshed when it comes back to the front, which makes it then), and not
when the keys it would show are the ones it shows: a remake mounts a widget per key and
styles each (some 20 ms), and a screen's keys are refreshed for every focus move and every
change of what its actions check, most of which change no key.
"""

from __future__ import annotations

from typing import Any

from textual.binding import Binding
from textual.screen import ModalScreen, Screen
from textual.widgets import Footer


class KeysFooter(Footer):
    """A Footer made again at most once a frame, and never while a screen hides it (a
    dialog does not: the footer below it shows the keys that work while it is open)."""

    _remake_pending = False
    _made_for: tuple[tuple[object, ...], ...] | None = None  # the keys it shows

    def bindings_changed(self, screen: Screen[Any]) -> None:
        self._bindings_ready = True
        if not screen.app.app_focus or not self.is_attached or screen is not self.screen:
            return
        if self._remake_pending or self._hidden():
            return  # a remake is on its way; or hidden: its screen's return remakes it
        self._remake_pending = True
        self.call_after_refresh(self._remake)

    async def _remake(self) -> None:
        self._remake_pending = False
        if self._hidden():  # hidden since it was asked for: the return remakes it
            return
        keys = self._keys()
        if keys != self._made_for:
            self._made_for = keys
            await self.recompose()

    def _keys(self) -> tuple[tuple[object, ...], ...]:
        """What Footer.compose makes keys of: each shown binding, whether it is enabled,
        its tooltip."""
        return tuple(
            _key(binding, enabled, tooltip)
            for (_, binding, enabled, tooltip) in self.screen.active_bindings.values()
            if binding.show
        )

    def _hidden(self) -> bool:
        front = self.app.screen
        return front is not self.screen and not isinstance(front, ModalScreen)


def _key(binding: Binding, enabled: bool, tooltip: str) -> tuple[object, ...]:
    return (binding.key, binding.key_display, binding.action, binding.description,
            binding.group, enabled, tooltip)  # fmt: skip
