"""The cockpit's intake (`j`): the trackers' issues taken in now, as `t25 intake` takes them
(core.control.intake), through the control plane the cockpit holds — local, or serve's.
What it did goes to the status line; a refusal (no intake configured, the forge away, a login
refused) to a message with its hint. `T25App` takes this as a mixin."""

from __future__ import annotations

from textual import work

from core.control.intake import take_in_projects
from core.errors import T25Error
from core.ports import Operations
from t25_tui.tui.screens.base import Cockpit
from t25_tui.tui.screens.dialogs import MessageDialog


class IntakeFlow(Cockpit):
    """`action_intake`, for the key and the palette."""

    control: Operations

    def status(self, note: str) -> None:
        raise NotImplementedError  # T25App: the status line

    def schedule_refresh(self) -> None:
        raise NotImplementedError  # T25App: the board read again soon

    @work(group="actions", exit_on_error=False)
    async def action_intake(self) -> None:
        from adapters.github_forge import open_forge

        self.status("taking issues in…")
        try:
            lines = await take_in_projects(self.control, lambda intake: open_forge(intake.host))
        except T25Error as exc:
            body = exc.message + (f"\n\nhint: {exc.hint}" if exc.hint else "")
            self.push_screen(MessageDialog("Intake refused", body))
            return
        self.status(" · ".join(lines[-3:]))  # the last project's count, with what came before
        self.schedule_refresh()
