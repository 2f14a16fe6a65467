"""Tasks from the tracker: each open issue a project's intake names (`projects[].intake`: a
label, or a search) filed as a task, once; an issue closed or unlabelled before its task
started implementing cancels it, as a decision of `intake`'s, in the audit log.

Once, whatever restarts and replicas: a task is filed under the issue's own key
(`github:acme/shop#12`, `NewTask.request_key`), and the store files no second task under a
key it holds (a unique index, both backends). So two sweeps racing — two replicas of serve,
`t25 intake` beside them — file one task, and a sweep killed between filing and commenting
files nothing the next time; the comment that names the task is made then.

An issue's words are somebody else's: its title and body reach the task escaped
(`core.domain.text.printable`) and cut to the task's bounds, with a link back; they become
the spec agent's description, quoted as every description is, and decide nothing.

Works through `Operations`, so a cockpit attached to serve takes issues in the same way.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass, field

from core.config.intake_config import IntakeConfig
from core.control import task_lists
from core.domain.decisions import Decision
from core.domain.forge import ForgeIssue
from core.domain.models import Task, TaskState, TaskType
from core.domain.states import TERMINAL
from core.domain.text import MAX_DESCRIPTION, MAX_TITLE, printable
from core.domain.verbs import Verb
from core.errors import ConfigError, PolicyRefused, T25Error
from core.ports import Operations
from core.ports.forge import Forge

LOG = logging.getLogger("t25.intake")
INTAKE = "intake"  # the actor of what intake files and decides
# Where a task still has not cost an implementation: an issue that goes away cancels it.
NOT_STARTED = (TaskState.RECEIVED, TaskState.SPEC, TaskState.PLAN, TaskState.AWAITING_APPROVAL)
MARKER = "<!-- t25:{task} -->"  # in the comment that names an issue's task: found, not repeated
STATE_MARKER = "<!-- t25:{task}:{state}:{since} -->"  # in a comment saying a state it entered
_SAID: set[str] = set()  # the state markers this process knows are on their issues
MAX_SAID = 10_000
STATE_LINES = {
    TaskState.AWAITING_APPROVAL: "has a plan waiting for approval",
    TaskState.NEEDS_INPUT: "asks a question of its operator",
    TaskState.FAILED: "failed; its operator decides what next",
    TaskState.DONE: "is done and waits to be merged",
}


@dataclass
class Intake:
    """What one pass over a project's tracker did."""

    filed: list[Task] = field(default_factory=list)
    known: int = 0  # issues whose task was filed before
    cancelled: list[Task] = field(default_factory=list)
    said: list[str] = field(default_factory=list)  # one line each: an issue left as it was


async def keep_taking_in(
    ops: Operations,
    open_forge: Callable[[IntakeConfig], Awaitable[Forge]],
    intakes: Sequence[tuple[str, IntakeConfig]],
) -> None:
    """serve's intake, for ever: each project's pass every `every_s` seconds (by project
    name: `intakes`). A pass that fails — the forge away, a login refused — is logged and
    made again at the next; one project's trouble holds up no other."""
    loop = asyncio.get_running_loop()
    due = {name: loop.time() for name, _ in intakes}
    while True:
        for name, intake in intakes:
            if loop.time() < due[name]:
                continue
            try:
                forge = await open_forge(intake)
                try:
                    done = await take_in(ops, forge, name, intake)
                finally:
                    await forge.close()
            except T25Error as exc:
                LOG.warning("intake of %s from %s: %s", name, intake.repo, exc.message)
            except Exception:  # a defect: said, and the next pass made all the same
                LOG.exception("intake of %s from %s failed", name, intake.repo)
            else:
                if done.filed or done.cancelled:
                    LOG.info(
                        "intake of %s: %d filed, %d cancelled",
                        name,
                        len(done.filed),
                        len(done.cancelled),
                    )
            due[name] = loop.time() + intake.every_s
        await asyncio.sleep(max(0.0, min(due.values()) - loop.time()))


async def take_in_projects(
    ops: Operations,
    open_forge: Callable[[IntakeConfig], Awaitable[Forge]],
    project: str | None = None,
) -> list[str]:
    """One pass over each project's tracker (or `project`'s), said in lines: each task filed
    or cancelled, what was left as it was, then one line per project (`t25 intake`, the
    cockpit). ConfigError when no project takes its tasks from a tracker."""
    projects = [
        p for p in ops.config.projects if p.intake is not None and project in (None, p.name)
    ]
    if not projects:
        raise ConfigError(
            "no project takes its tasks from a tracker"
            + (f" under the name {project}" if project else ""),
            hint="give a project `intake: {repo: owner/name, label: t25}` in t25.yaml",
        )
    lines: list[str] = []
    for each in projects:
        assert each.intake is not None  # filtered above; mypy cannot see it
        forge = await open_forge(each.intake)
        try:
            done = await take_in(ops, forge, each.name, each.intake)
        finally:
            await forge.close()
        lines += [
            f"filed {t.id} from {printable(t.request_key or '')}: {t.title}" for t in done.filed
        ]
        lines += [f"cancelled {t.id}: its issue went away" for t in done.cancelled]
        lines += [printable(line) for line in done.said]
        lines.append(
            f"{each.name} ({each.intake.repo}): {len(done.filed)} filed, "
            f"{done.known} filed before, {len(done.cancelled)} cancelled"
        )
    return lines


def issue_key(intake: IntakeConfig, number: int) -> str:
    """The key an issue's task is filed under: the same from every process, for ever."""
    return f"{intake.forge}:{intake.repo}#{number}"


async def take_in(ops: Operations, forge: Forge, project: str, intake: IntakeConfig) -> Intake:
    """File a task per issue the intake names, cancel those whose issue went away, and say
    on each new task's issue which task it became."""
    done = Intake()
    labels = [intake.label] if intake.label else []
    issues = await forge.issues(intake.repo, labels=labels, query=intake.query)
    ours = {t.request_key or "": t for t in await _intake_tasks(ops, project, intake)}
    for issue in issues:
        key = issue_key(intake, issue.number)
        if key in ours:
            done.known += 1
            continue
        try:
            task = await ops.new_task(
                _title(issue),
                actor=INTAKE,
                type=TaskType(intake.type_of(issue.labels)),
                description=_description(issue),
                project=project,
                request_key=key,
                priority=intake.priority_of(issue.labels),
            )
        except T25Error as exc:  # refused at the door: this issue waits, the others go on
            done.said.append(f"not filed {key}: {exc.message}")
            continue
        if task.state in TERMINAL:  # filed long ago, and finished: an issue has one task
            done.known += 1
            continue
        done.filed.append(task)
        if intake.comment:
            await _say_filed(forge, intake, issue, task)
    open_keys = {issue_key(intake, i.number) for i in issues}
    for key, known in ours.items():
        if key not in open_keys and known.state in NOT_STARTED:
            await _cancel_if_gone(ops, forge, intake, known, key, done)
        elif intake.comment and known.state.value in intake.announce:
            await _say_state(forge, intake, known, int(key.rsplit("#", 1)[1]))
    return done


async def _intake_tasks(ops: Operations, project: str, intake: IntakeConfig) -> list[Task]:
    """The project's unfinished tasks intake filed from this tracker."""
    prefix = issue_key(intake, 0)[:-1]
    found = await task_lists.unfinished(ops, project=project)
    return [t for t in found if (t.request_key or "").startswith(prefix)]


async def _cancel_if_gone(
    ops: Operations, forge: Forge, intake: IntakeConfig, task: Task, key: str, done: Intake
) -> None:
    """Cancel `task` when its issue is closed or no longer one the intake names."""
    number = int(key.rsplit("#", 1)[1])
    issue = await forge.issue(intake.repo, number)
    if issue.state == "open" and intake.label is not None and intake.label in issue.labels:
        return  # still labelled: the listing missed it (it moved past a page); keep it
    if issue.state == "open" and intake.label is None:
        return  # a search is no promise: an issue it no longer finds keeps its task
    why = "closed" if issue.state == "closed" else f"no longer labelled {intake.label}"
    try:
        task = await ops.decide(
            Decision(
                verb=Verb.CANCEL,
                task=task.id,
                actor=INTAKE,
                text=f"issue {intake.repo}#{number} was {why}",
            )
        )
    except PolicyRefused as exc:  # it started meanwhile: the operator decides
        done.said.append(f"kept {task.id}: {exc.message}")
        return
    done.cancelled.append(task)
    if intake.comment:
        await forge.comment(intake.repo, number, f"T25 cancelled {task.id}: the issue was {why}.")


async def _say_filed(forge: Forge, intake: IntakeConfig, issue: ForgeIssue, task: Task) -> None:
    marker = MARKER.format(task=task.id)
    said = await forge.comments(intake.repo, issue.number)
    if any(marker in c.body for c in said):
        return
    await forge.comment(
        intake.repo,
        issue.number,
        f"{marker}\nT25 filed this issue as task {task.id} ({task.state}); "
        "it will say here how the task goes.",
    )


async def _say_state(forge: Forge, intake: IntakeConfig, task: Task, number: int) -> None:
    """Say on the issue which state its task entered, once per entry (a task asking twice
    says so twice): the comment carries the state and when the task entered it."""
    marker = STATE_MARKER.format(task=task.id, state=task.state, since=task.state_since.isoformat())
    if marker in _SAID:  # this process said it, or saw it said: the issue is not read again
        return
    if not any(marker in c.body for c in await forge.comments(intake.repo, number)):
        what = STATE_LINES.get(task.state, "is now {state}").format(state=task.state)
        await forge.comment(intake.repo, number, f"{marker}\nT25: task {task.id} {what}.")
    if len(_SAID) >= MAX_SAID:
        _SAID.clear()  # a bound: forgetting costs one read of an issue's comments
    _SAID.add(marker)


def _title(issue: ForgeIssue) -> str:
    title = printable(" ".join(issue.title.split())) or f"Issue #{issue.number}"
    return title[:MAX_TITLE]


def _description(issue: ForgeIssue) -> str:
    """The issue's body and a link back, escaped, within a description's bound."""
    source = issue.url or f"issue #{issue.number}"
    link = printable(f"\n\n(from {source}, by {issue.author or 'someone'})", multiline=True)
    return printable(issue.body, multiline=True)[: MAX_DESCRIPTION - len(link)] + link
