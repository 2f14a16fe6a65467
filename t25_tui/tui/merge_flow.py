"""A merge from the cockpit, said as it goes.

The merge question (`MergeDialog`) comes first; a change touching protected paths then asks
once more, naming each of them, since a yes there lets a workflow or a lock file into the
default branch. While the merge is tried the status line says what it is doing ("merging
T-1: running 2 checks on the merge result…"), and it ends with what landed ("merged T-1
into main as 54f8d6b; pushed main to origin") or, refused, with the reason in a message.
"""

from __future__ import annotations

from typing import Any, Protocol

from core.control.merge_landing import last_landing, merging_line
from core.domain.decisions import Decision
from core.domain.text import printable
from core.domain.verbs import Verb
from core.errors import T25Error
from core.ports import Operations
from t25_tui.tui.screens.dialogs import MessageDialog


class Cockpit(Protocol):
    """What a merge from the cockpit uses of it (t25_tui.tui.app.T25App)."""

    control: Operations
    actor: str

    def status(self, note: str) -> None: ...
    def push_screen(self, screen: Any) -> Any: ...
    def schedule_refresh(self) -> None: ...


def protected_question(tid: str, protected: tuple[str, ...]) -> str:
    """The second question of a merge touching protected paths: each of them named."""
    listed = "\n".join(f"  {printable(p)}" for p in protected)
    return (
        f"{tid} changes {len(protected)} protected path(s) (policies.protected_paths):\n"
        f"{listed}\n\nMerge these into the default branch? Your name goes in the audit "
        "log beside each of them."
    )


async def merge_now(app: Cockpit, tid: str, reason: str, protected: tuple[str, ...]) -> None:
    """Merge `tid` through the control plane, saying on the status line what it does."""
    control = app.control
    task = await control.task(tid)
    app.status(merging_line(task, control.config))
    before = await control.last_event_id()
    decision = Decision(
        verb=Verb.MERGE, task=tid, actor=app.actor, text=reason, allow_paths=protected
    )
    try:
        task = await control.decide(decision)
    except T25Error as exc:
        app.status(f"the merge of {tid} was refused")
        body = exc.message + (f"\n\nhint: {exc.hint}" if exc.hint else "")
        app.push_screen(MessageDialog("Merge refused", body))
        return
    found = last_landing(await control.events(tid, after=before))
    app.status(printable(found.line()) if found else f"merged {tid}")
    app.schedule_refresh()
