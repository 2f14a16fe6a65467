"""What the cockpit shows, computed from domain objects: cards, filters, the human mark.

No Textual here: the board widget renders these values, tests and the benchmark build
them directly. Domain truth stays in the core; this is only presentation.

Stored text — titles, descriptions, reasons, actors, questions, artifacts, errors, agent
output — reaches the screen only through `literal`: escaped by `core.domain.text.printable`, so
no escape sequence reaches the operator's terminal, and held in a Rich `Text`, so `[red]`
in a title is shown as typed rather than read as markup.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime

from rich.text import Text

from core.config.schema import Config, Limits
from core.control import task_lists
from core.domain.cost import Spend
from core.domain.models import Task, TaskState, parse_id
from core.domain.text import printable
from core.errors import ConfigError, NotFound
from core.ports import Operations

Clock = Callable[[], datetime]

# Board columns, in pipeline order, then the escapes: every state has a column.
COLUMNS: tuple[TaskState, ...] = tuple(TaskState)
# What a human must do for a task in this state (the card's mark and the inbox's reason).
HUMAN_ACTION = {
    TaskState.AWAITING_APPROVAL: "approve or reject the plan",
    TaskState.NEEDS_INPUT: "answer the question",
    TaskState.FAILED: "look, then retry or cancel",
}
CARDS_PER_COLUMN = 100  # older cards beyond this are counted, not drawn (filter to see them)


def literal(text: object, *, multiline: bool = False, style: str = "") -> Text:
    """Stored text as the operator should see it: escaped, and never read as markup."""
    return Text(printable(str(text), multiline=multiline), style=style)


def wall_clock() -> datetime:
    return datetime.now(UTC)


def human_needed(task: Task) -> str | None:
    """Why a human is needed for this task now, or None."""
    if task.state is TaskState.DONE and not task.merged and not task.archived:
        return "ready to merge"
    if task.violation:
        return "changed outside its worktree: yours? acknowledge it"
    return HUMAN_ACTION.get(task.state)


def age(since: datetime, now: datetime) -> str:
    seconds = int((now - since).total_seconds())
    for unit, size in (("d", 86400), ("h", 3600), ("m", 60)):
        if seconds >= size:
            return f"{seconds // size}{unit}"
    return f"{max(seconds, 0)}s"


def duration(seconds: float | None) -> str:
    if seconds is None:
        return "-"
    if seconds < 60:
        return f"{seconds:.1f}s"
    return f"{int(seconds // 60)}m{int(seconds % 60):02d}s"


@dataclass(frozen=True)
class Card:
    """One task as the board draws it."""

    task: Task
    cost: float
    human: str | None
    over_budget: bool = False  # its spend reached its budget: it waits before its next run
    blockers: tuple[str, ...] = ()  # the tasks it waits for, not merged yet: it has not started

    @property
    def id(self) -> str:
        return self.task.id

    @property
    def waits_for(self) -> str:
        """What a blocked card says before its title: `waits for T-3, T-5`."""
        return f"waits for {', '.join(self.blockers)}" if self.blockers else ""

    def lines(self, now: datetime) -> tuple[str, str]:
        t = self.task
        head = (
            f"{t.id} {t.type.value} {age(t.state_since, now)} "
            f"q{t.qa_loops} r{t.review_loops} ${self.cost:.2f}"
        )
        return head, t.title


def cards(
    tasks: Iterable[Task],
    spent: Mapping[str, float],
    over_budget: Iterable[str] = (),
    blocked: Mapping[str, tuple[str, ...]] | None = None,
) -> list[Card]:
    """A card per task, with what its runs cost so far (`Store.cost_by_task`), whether it
    is one of the tasks `over_budget` names, and what it waits for (`blocked`)."""
    over = set(over_budget)
    blocked = blocked or {}
    return [
        Card(t, spent.get(t.id, 0.0), human_needed(t), t.id in over, blocked.get(t.id, ()))
        for t in tasks
    ]


async def board_tasks(
    control: Operations, *, everything: bool
) -> tuple[list[Task], dict[TaskState, int]]:
    """The tasks the board reads, and how many finished ones of each state it left unread.

    The unfinished tasks and the `CARDS_PER_COLUMN` newest finished of each finished state
    (core.control.task_lists): what a lane draws, whatever the history holds; or, with
    `everything` (a filter is searching), every task that is not archived."""
    if everything:
        return await control.tasks(), {}
    newest = await task_lists.newest_finished(control, CARDS_PER_COLUMN)
    loaded = Counter(t.state for t in newest)
    unread = {
        state: n - loaded[state]
        for state, n in (await task_lists.finished_counts(control)).items()
        if n > loaded[state]
    }
    shown = [*await task_lists.unfinished(control), *newest]
    return sorted(shown, key=lambda t: parse_id("T", t.id)), unread


async def blocked(control: Operations, tasks: Sequence[Task]) -> dict[str, tuple[str, ...]]:
    """The tasks of `tasks` held in RECEIVED by a task they wait for (`after`) that is not
    merged, each with the ones it waits for: what `Queries.blockers` tells the sweeper,
    read from the board's own list. Only a task the list lacks (archived, say) is read."""
    known: dict[str, Task | None] = {t.id: t for t in tasks}
    found = {}
    for task in tasks:
        if task.state is not TaskState.RECEIVED or task.archived or not task.after:
            continue
        for ref in task.after:
            if ref not in known:
                try:
                    known[ref] = await control.task(ref)
                except NotFound:
                    known[ref] = None
        waiting = tuple(ref for ref in task.after if not _merged(known[ref]))
        if waiting:
            found[task.id] = waiting
    return found


def _merged(task: Task | None) -> bool:
    return task is not None and task.merged


def budget_of(task: Task, limits: Limits | None) -> tuple[float | None, int | None]:
    """The budget in force for `task` (USD, tokens): its own, else its project's `limits`."""
    usd, tokens = task.budget_usd, task.budget_tokens
    if limits is not None:
        usd = limits.max_cost_usd if usd is None else usd
        tokens = limits.max_tokens if tokens is None else tokens
    return usd, tokens


# States a task spends no more in: its budget is no longer news.
SETTLED = (TaskState.DONE, TaskState.CANCELLED)


async def over_budget(
    control: Operations, tasks: Iterable[Task], spent: Mapping[str, float]
) -> set[str]:
    """The tasks whose spend reached their budget. Dollars come from `spent` (the board's
    read); tokens are counted only for unsettled tasks with a token budget whose dollars
    have not already reached theirs, summed by the store in one read for all of them (a
    read per task was a request per card attached to a serve; a read of every run grew
    with the whole history)."""
    limits: dict[str, Limits | None] = {}
    over = set()
    by_tokens: list[tuple[Task, Spend]] = []
    for task in tasks:
        if task.state in SETTLED or task.archived:
            continue
        if task.project not in limits:
            limits[task.project] = _limits(control.config, task.project)
        usd, tokens = budget_of(task, limits[task.project])
        if usd is None and tokens is None:
            continue
        spend = Spend(usd=spent.get(task.id, 0.0), budget_usd=usd, budget_tokens=tokens)
        if spend.reached:
            over.add(task.id)
        elif tokens is not None:
            by_tokens.append((task, spend))
    if by_tokens:
        used = await control.tokens_by_task([task.id for task, _ in by_tokens])
        for task, spend in by_tokens:
            if spend.model_copy(update={"tokens": used.get(task.id, 0)}).reached:
                over.add(task.id)
    return over


def _limits(config: Config, project: str) -> Limits | None:
    """A project's limits; None for a project no longer in t25.yaml (its tasks keep only
    their own budgets)."""
    try:
        return config.for_project(project).limits
    except ConfigError:
        return None


@dataclass(frozen=True)
class BoardFilter:
    """`project:shop type:fix login` — each part optional; words match id or title."""

    project: str | None = None
    type: str | None = None
    text: str = ""

    @classmethod
    def parse(cls, query: str) -> BoardFilter:
        project = type_ = None
        words = []
        for part in query.split():
            key, sep, value = part.partition(":")
            if sep and key.lower() in ("project", "p") and value:
                project = value
            elif sep and key.lower() in ("type", "t") and value:
                type_ = value.lower()
            else:
                words.append(part)
        return cls(project, type_, " ".join(words).lower())

    def __bool__(self) -> bool:
        return bool(self.project or self.type or self.text)

    def matches(self, task: Task) -> bool:
        if self.project and task.project != self.project:
            return False
        if self.type and task.type.value != self.type:
            return False
        return not self.text or self.text in f"{task.id} {task.title}".lower()

    def describe(self) -> str:
        parts = [
            f"project:{self.project}" if self.project else "",
            f"type:{self.type}" if self.type else "",
            self.text,
        ]
        return " ".join(p for p in parts if p)
