"""`t25 task new|list|show`."""

from __future__ import annotations

import argparse
from collections import defaultdict

from core.events import TaskTransitioned
from core.models import ArtifactKind, TaskState, TaskType
from core.service import Factory
from t25_tui.commands.context import actor_of, age, run


def new(args: argparse.Namespace) -> int:
    async def body(factory: Factory) -> None:
        task = await factory.new_task(args.title, actor=actor_of(args), type=TaskType(args.type),
                                      description=args.description, project=args.project)
        print(f"{task.id}  {task.state}  {task.branch}  {task.title}")

    run(args, body)
    return 0


def list_(args: argparse.Namespace) -> int:
    async def body(factory: Factory) -> None:
        states = [TaskState(s) for s in args.state] if args.state else None
        tasks = await factory.store.list_tasks(states=states, project=args.project,
                                               include_archived=args.all)
        if not tasks:
            print("no tasks" + (" match" if states or args.project else
                                " yet — file one with: t25 task new \"…\""))
            return
        width = max(len(t.id) for t in tasks)
        print(f"{'ID':<{width}}  {'STATE':<17}  {'TYPE':<8}  {'AGE':>4}  TITLE")
        for t in tasks:
            flag = " (archived)" if t.archived else ""
            print(f"{t.id:<{width}}  {t.state:<17}  {t.type:<8}  {age(t.state_since):>4}  "
                  f"{t.title}{flag}")

    run(args, body)
    return 0


def show(args: argparse.Namespace) -> int:
    async def body(factory: Factory) -> None:
        task = await factory.task(args.id)
        store = factory.store
        print(f"{task.id}  {task.title}")
        print(f"  state    {task.state}{'  (archived)' if task.archived else ''}"
              f"  for {age(task.state_since)}")
        print(f"  type     {task.type}   branch {task.branch}   project {task.project}")
        if task.description:
            about = task.description.strip().replace("\n", "\n           ")
            print(f"  about    {about}")
        if task.error:
            print(f"  error    {task.error}")
        print("history")
        for event in await store.events_after(0, task_id=task.id, limit=100_000):
            if isinstance(event, TaskTransitioned):
                why = f"  — {event.reason}" if event.reason else ""
                print(f"  {event.at:%Y-%m-%d %H:%M:%S}  {event.from_state} → {event.to_state}"
                      f"  by {event.actor}{why}")
        runs = await store.list_runs(task_id=task.id)
        print("runs" if runs else "runs     none yet")
        per_role: dict[str, float] = defaultdict(float)
        width = max((len(r.id) for r in runs), default=0)
        for r in runs:
            per_role[r.role] += r.cost_usd
            tokens = r.usage.input_tokens + r.usage.output_tokens
            print(f"  {r.id:<{width}}  {r.stage:<12} {r.role:<9} {r.status:<9} "
                  f"{r.adapter or '-':<10} {r.model or '-':<14} {tokens:>7} tok  ${r.cost_usd:.4f}"
                  + (f"  {r.error}" if r.error else ""))
        artifacts = await store.list_artifacts(task_id=task.id)
        shown = [a for a in artifacts if a.meta.kind not in (ArtifactKind.PROMPT, ArtifactKind.LOG)]
        print("artifacts" if artifacts else "artifacts none yet")
        width = max((len(a.id) for a in shown), default=0)
        for a in shown:
            print(f"  {a.id:<{width}}  {a.meta.kind:<9} {a.size:>7} B  sha256:{a.sha256[:12]}  "
                  f"from {a.meta.run_id or '-'} ({a.meta.role or '-'})")
        if len(shown) < len(artifacts):
            print(f"  + {len(artifacts) - len(shown)} prompts and logs (t25 logs {task.id})")
        total = sum(per_role.values())
        roles = ", ".join(f"{role} ${cost:.4f}" for role, cost in sorted(per_role.items()))
        print(f"cost     ${total:.4f}" + (f"  ({roles})" if roles else ""))

    run(args, body)
    return 0
