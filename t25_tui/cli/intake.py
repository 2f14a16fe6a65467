"""`t25 intake`: a task per issue of each project's tracker (`projects[].intake`), filed once;
a task whose issue was closed or unlabelled before it started implementing, cancelled
(core.control.intake). One line per task filed or cancelled, then one per project."""

from __future__ import annotations

import argparse

from core.control.intake import take_in_projects
from t25_tui.cli.context import run_runtime
from t25_tui.runtime import Runtime, open_intake_forge


def intake(args: argparse.Namespace) -> int:
    async def body(runtime: Runtime) -> int:
        for line in await take_in_projects(runtime.operations, open_intake_forge, args.project):
            print(line)
        return 0

    return run_runtime(args, body)
