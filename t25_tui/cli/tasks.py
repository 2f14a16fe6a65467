"""`t25 task new|list|show`.

Everything these print that came from outside T25 (titles, descriptions, reasons, actors,
errors) goes through `core.domain.text.printable`: text stored before the door checked it may
still hold escape sequences, and they must not reach the operator's terminal.
"""

from __future__ import annotations

import argparse
import sys
from collections import defaultdict

from core.control.service import ControlPlane
from core.domain.events import TaskTransitioned
from core.domain.models import Artifact, ArtifactKind, TaskState, TaskType
from core.domain.text import printable
from core.errors import ArtifactCorrupted, ConfigError
from t25_tui.cli.context import actor_of, age, run

# `t25 task show` exits with this when an artifact's content no longer matches its
# SHA-256: the task is shown in full, with a warning on each such artifact.
CORRUPTED_EXIT = 1


def new(args: argparse.Namespace) -> int:
    async def body(control: ControlPlane) -> None:
        task = await control.new_task(
            args.title,
            actor=actor_of(args),
            type=TaskType(args.type),
            description=args.description,
            project=args.project,
        )
        print(f"{task.id}  {task.state}  {task.branch}  {printable(task.title)}")

    run(args, body)
    return 0


def list_(args: argparse.Namespace) -> int:
    async def body(control: ControlPlane) -> None:
        if args.project is not None:
            await _known_project(control, args.project)
        states = [TaskState(s) for s in args.state] if args.state else None
        tasks = await control.store.list_tasks(
            states=states, project=args.project, include_archived=args.all
        )
        if not tasks:
            print(
                "no tasks"
                + (" match" if states or args.project else ' yet — file one with: t25 task new "…"')
            )
            return
        width = max(len(t.id) for t in tasks)
        print(f"{'ID':<{width}}  {'STATE':<17}  {'TYPE':<8}  {'AGE':>4}  TITLE")
        for t in tasks:
            flag = " (archived)" if t.archived else ""
            print(
                f"{t.id:<{width}}  {t.state:<17}  {t.type:<8}  {age(t.state_since):>4}  "
                f"{printable(t.title)}{flag}"
            )

    run(args, body)
    return 0


async def _known_project(control: ControlPlane, name: str) -> None:
    """A project the store knows (the configured ones, and any that still has tasks)."""
    known = sorted(
        {p.name for p in await control.store.list_projects()}
        | {p.name for p in control.config.projects}
    )
    if name not in known:
        raise ConfigError(
            f"unknown project {printable(name)!r} (known: {', '.join(known)})",
            hint=f"projects are listed under `projects:` in {control.config.path}",
        )


def show(args: argparse.Namespace) -> int:
    async def body(control: ControlPlane) -> bool:
        task = await control.task(args.id)
        store = control.store
        print(f"{task.id}  {printable(task.title)}")
        print(
            f"  state    {task.state}{'  (archived)' if task.archived else ''}"
            f"  for {age(task.state_since)}"
        )
        print(f"  type     {task.type}   branch {task.branch}   project {task.project}")
        if task.description:
            about = printable(task.description.strip(), multiline=True)
            print(f"  about    {about.replace(chr(10), chr(10) + ' ' * 11)}")
        if task.error:
            print(f"  error    {printable(task.error)}")
        print("history")
        for event in await store.events_after(0, task_id=task.id, limit=100_000):
            if isinstance(event, TaskTransitioned):
                why = f"  — {printable(event.reason)}" if event.reason else ""
                print(
                    f"  {event.at:%Y-%m-%d %H:%M:%S}  {event.from_state} → {event.to_state}"
                    f"  by {printable(event.actor)}{why}"
                )
        runs = await store.list_runs(task_id=task.id)
        print("runs" if runs else "runs     none yet")
        per_role: dict[str, float] = defaultdict(float)
        width = max((len(r.id) for r in runs), default=0)
        for r in runs:
            per_role[r.role] += r.cost_usd
            tokens = r.usage.input_tokens + r.usage.output_tokens
            print(
                f"  {r.id:<{width}}  {r.stage:<12} {r.role:<9} {r.status:<9} "
                f"{r.adapter or '-':<10} {printable(r.model or '-'):<14} {tokens:>7} tok  "
                f"${r.cost_usd:.4f}" + (f"  {printable(r.error)}" if r.error else "")
            )
        artifacts = await store.list_artifacts(task_id=task.id)
        corrupted = {a.id: exc for a in artifacts if (exc := await _corruption(control, a))}
        # Prompts and logs are counted, not listed, unless one of them is corrupted.
        shown = [
            a
            for a in artifacts
            if a.id in corrupted or a.meta.kind not in (ArtifactKind.PROMPT, ArtifactKind.LOG)
        ]
        print("artifacts" if artifacts else "artifacts none yet")
        width = max((len(a.id) for a in shown), default=0)
        for a in shown:
            print(
                f"  {a.id:<{width}}  {a.meta.kind:<9} {a.size:>7} B  sha256:{a.sha256[:12]}  "
                f"from {a.meta.run_id or '-'} ({a.meta.role or '-'})"
            )
            if a.id in corrupted:
                print(f"  {'':<{width}}  warning: {corrupted[a.id].message}")
        if len(shown) < len(artifacts):
            print(f"  + {len(artifacts) - len(shown)} prompts and logs (t25 logs {task.id})")
        total = sum(per_role.values())
        roles = ", ".join(f"{role} ${cost:.4f}" for role, cost in sorted(per_role.items()))
        print(f"cost     ${total:.4f}" + (f"  ({roles})" if roles else ""))
        if corrupted:
            sys.stdout.flush()
            print(
                f"t25: warning: {len(corrupted)} of {task.id}'s artifacts no longer match "
                f"their SHA-256\n  hint: {next(iter(corrupted.values())).hint}",
                file=sys.stderr,
            )
        return not corrupted

    return 0 if run(args, body) else CORRUPTED_EXIT


async def _corruption(control: ControlPlane, artifact: Artifact) -> ArtifactCorrupted | None:
    """Why the artifact's stored content cannot be trusted, or None when it re-hashes right."""
    try:
        await control.store.get_artifact(artifact.id)
    except ArtifactCorrupted as exc:
        return exc
    return None
