"""The pipeline's test factory: a real repository, the scripted agents as its adapters, the
configuration the tests write (`write_config`, `PIPELINE_CONFIG` for the command line)."""

from __future__ import annotations

import asyncio
import os
import sys
from contextlib import AsyncExitStack
from pathlib import Path

import yaml

from adapters.base import CliAdapter
from adapters.checks import run_check
from adapters.scripted import ScriptedSpec
from core.config.schema import load_config
from core.control.service import ControlPlane
from core.control.sweeper import Sweeper
from core.domain.events import TaskTransitioned
from core.domain.models import ArtifactKind, TaskState, TaskType
from core.workspace.git import git_sync
from t25_tui.runtime import local_sweeper, open_runtime

SCRIPTED = {"adapter": "scripted"}

# A reviewer that did not write the change (policies.reviewer_differs_from_author: model).
REVIEWING = {"adapter": "scripted", "model": "scripted-2"}

ROLES = ("spec", "planner", "dev", "qa", "reviewer", "docs")


class SecondScripted(ScriptedSpec):
    """The same scripted CLI under another adapter name, to test fallback chains."""

    name = "scripted-b"


def write_config(repo: Path, **overrides) -> None:
    config = {
        "projects": [{"name": "shop", "repo": "."}],
        "roles": {role: [REVIEWING if role == "reviewer" else SCRIPTED] for role in ROLES},
        "limits": {
            "max_files_changed": 5,
            "max_diff_lines": 50,
            "max_review_loops": 2,
            "max_qa_loops": 1,
            "run_timeout_s": 60,
            "workers": 2,
        },
        "qa": {"checks": [{"name": "unit", "run": [sys.executable, "-m", "unittest", "-q"]}]},
        "cost": {
            "rates": {
                "scripted-1": {"input": 3.0, "output": 15.0},
                "scripted-2": {"input": 3.0, "output": 15.0},
            }
        },
    }
    for key, value in overrides.items():
        if key in ("roles", "limits"):
            config[key] = {**config[key], **value}
        else:
            config[key] = value
    (repo / "t25.yaml").write_text(yaml.safe_dump(config))


class Env:
    """A factory on a real repository, with the scripted agents as its adapters."""

    def __init__(self, repo: Path) -> None:
        self.repo = repo
        self.control: ControlPlane | None = None
        self._open = AsyncExitStack()

    async def open(self, **overrides) -> ControlPlane:
        write_config(self.repo, **overrides)
        config = load_config(self.repo / "t25.yaml")
        runtime = await self._open.enter_async_context(open_runtime(config))
        self.control = runtime.control
        return self.control

    def sweeper(self, **kw) -> Sweeper:
        adapters = {
            "scripted": CliAdapter(ScriptedSpec()),
            "scripted-b": CliAdapter(SecondScripted()),
        }
        kw.setdefault("heartbeat_s", 0.2)
        return local_sweeper(self.control, adapters, run_check, **kw)

    async def work(self, **kw) -> None:
        await asyncio.wait_for(self.sweeper(**kw).work(), 120)

    async def new(self, title: str = "Add a greeting", description: str = "", **kw):
        return await self.control.new_task(
            title, actor="ana", description=description, type=kw.get("type", TaskType.FEAT)
        )

    async def task(self, ref: str):
        return await self.control.task(ref)

    async def history(self, ref: str) -> list[TaskState]:
        events = await self.control.store.events_after(0, task_id=ref, limit=10_000)
        return [e.to_state for e in events if isinstance(e, TaskTransitioned)]

    async def close(self) -> None:
        await self._open.aclose()


def trunk_log(repo: Path) -> list[str]:
    return git_sync("log", "--format=%s", "trunk", cwd=repo).splitlines()


def working_in(root: Path) -> list[int]:
    """The processes whose working directory lies under `root`."""
    found = []
    for entry in Path("/proc").iterdir():
        try:
            if entry.name.isdigit() and Path(os.readlink(entry / "cwd")).is_relative_to(root):
                found.append(int(entry.name))
        except OSError:
            continue
    return found


async def review_prompt(control, task_id: str) -> str:
    prompts = [
        a
        for a in await control.store.list_artifacts(task_id=task_id)
        if a.meta.kind is ArtifactKind.PROMPT and a.meta.role == "reviewer"
    ]
    _, content = await control.store.get_artifact(prompts[-1].id)
    return content.decode()


PIPELINE_CONFIG = """\
projects: [{name: shop, repo: .}]
roles:
  spec: [{adapter: scripted}]
  planner: [{adapter: scripted}]
  dev: [{adapter: scripted}]
  qa: [{adapter: scripted}]
  reviewer: [{adapter: scripted, model: scripted-2}]  # not the dev's model
  docs: [{adapter: scripted}]
"""
