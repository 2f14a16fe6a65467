"""`t25 intake`: a task per issue of each project's tracker (`projects[].intake`), filed once;
a task whose issue was closed or unlabelled before it started implementing, cancelled
(core.control.intake). One line per task filed or cancelled, then one per project."""

from __future__ import annotations

import argparse

from adapters.github_forge import open_forge
from core.control.intake import take_in
from core.domain.text import printable
from core.errors import ConfigError
from t25_tui.cli.context import run_runtime
from t25_tui.runtime import Runtime


def intake(args: argparse.Namespace) -> int:
    async def body(runtime: Runtime) -> int:
        projects = [
            p
            for p in runtime.config.projects
            if p.intake is not None and args.project in (None, p.name)
        ]
        if not projects:
            raise ConfigError(
                "no project takes its tasks from a tracker"
                + (f" under the name {args.project}" if args.project else ""),
                hint="give a project `intake: {repo: owner/name, label: t25}` in t25.yaml",
            )
        for project in projects:
            assert project.intake is not None  # filtered above; mypy cannot see it
            forge = await open_forge(project.intake.host)
            try:
                done = await take_in(runtime.operations, forge, project.name, project.intake)
            finally:
                await forge.close()
            for task in done.filed:
                print(f"filed {task.id} from {printable(task.request_key or '')}: {task.title}")
            for task in done.cancelled:
                print(f"cancelled {task.id}: its issue went away")
            for line in done.said:
                print(printable(line))
            print(
                f"{project.name} ({project.intake.repo}): {len(done.filed)} filed, "
                f"{done.known} filed before, {len(done.cancelled)} cancelled"
            )
        return 0

    return run_runtime(args, body)
