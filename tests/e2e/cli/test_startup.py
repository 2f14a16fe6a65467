"""Start-up: what a command imports and builds before it can answer.

Behaviour, not timing (bench/cli.py has the figures): a command that only reads imports
neither the servers, the cockpit, the Postgres driver, the adapters nor the decision
machinery; `--help` and `--version` import nothing of T25's beyond the command line; and
a domain value builds its validator when it is first used, not when it is imported.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
import tomllib
from importlib import metadata
from pathlib import Path

import pytest

from adapters import registry
from tests.support import CHECKOUT

ROOT = CHECKOUT

# `python -m t25_tui ARGS…`, reporting at exit the modules it imported and the models it built.
_REPORTING = textwrap.dedent(
    """
    import atexit, json, runpy, sys

    path = sys.argv[1]

    def report():
        built = []
        pydantic = sys.modules.get("pydantic")
        if pydantic is not None:
            pending = [pydantic.BaseModel]
            while pending:
                cls = pending.pop()
                pending.extend(cls.__subclasses__())
                if cls.__module__.startswith("core.") and cls.__pydantic_complete__:
                    built.append(f"{cls.__module__}.{cls.__qualname__}")
        with open(path, "w") as out:
            json.dump({"modules": sorted(sys.modules), "built": sorted(built)}, out)

    atexit.register(report)
    sys.argv = ["t25", *sys.argv[2:]]
    runpy.run_module("t25_tui", run_name="__main__", alter_sys=True)
    """
)


def started(
    args: list[str], cwd: Path, tmp_path: Path, env: dict[str, str] | None = None
) -> tuple[int, dict[str, list[str]]]:
    """Run `python -m t25_tui ARGS` in `cwd`; its exit code, imported modules, built models."""
    report = tmp_path / "startup.json"
    done = subprocess.run(
        [sys.executable, "-c", _REPORTING, str(report), *args],
        cwd=cwd,
        env={**os.environ, **(env or {})},
        stdin=subprocess.DEVNULL,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == 0, done.stderr
    return done.returncode, json.loads(report.read_text())


# What a read has no use for: the HTTP stack, the cockpit, the Postgres driver, the
# agent adapters and their process machinery, the audit log, the worktrees, the worker.
NOT_FOR_READS = (
    "textual",
    "httpx",
    "httpx_sse",
    "fastapi",
    "starlette",
    "uvicorn",
    "asyncpg",
    "adapters.base",
    "adapters.process",
    "adapters.claude",
    "core.control.audit",
    "core.workspace.worktrees",
    "core.workspace.fingerprint",
    "core.worker",
    "t25_tui.api",
    "t25_tui.tui",
    "t25_tui.cli.shapes",  # the `--json` shapes: only for --json
)


@pytest.fixture
def filed(t25, repo: Path) -> Path:
    """`repo` after `t25 init` and one `t25 task new`, both through the real binary."""
    assert t25("init").code == 0
    done = t25("task", "new", "Add rate limiting")
    assert done.code == 0, done.err
    return repo


@pytest.mark.parametrize("args", [["task", "list"], ["task", "show", "T-1"]], ids=" ".join)
def test_a_read_command_imports_no_server_ui_driver_adapter_or_decision_machinery(
    filed, tmp_path, args
):
    _, seen = started(args, filed, tmp_path)
    unwanted = [m for m in seen["modules"] if m.startswith(NOT_FOR_READS)]
    assert unwanted == []
    assert "store.sqlite" in seen["modules"]  # it did read the store


def test_listing_tasks_builds_no_event_model(filed, tmp_path):
    _, seen = started(["task", "list"], filed, tmp_path)
    assert "core.domain.models.Task" in seen["built"]
    assert [m for m in seen["built"] if m.startswith("core.domain.events.")] == []


# What every command imports first, `--help` too: taking T25's secrets out of its environment
# (os and sys only).
HOLDING_SECRETS = ("core", "core.config", "core.config.held_secrets")
# The operator verbs' table, which the parser is built from (the standard library only).
VERBS_TABLE = ("core.domain", "core.domain.verbs")


@pytest.mark.parametrize("args", [["--help"], ["--version"]], ids=" ".join)
def test_help_and_version_import_nothing_but_the_command_line(repo, tmp_path, args):
    _, seen = started(args, repo, tmp_path)
    heavy = [
        m
        for m in seen["modules"]
        if m.split(".")[0] in ("pydantic", "yaml", "asyncio", "aiosqlite", "core", "store")
        and m not in (*HOLDING_SECRETS, *VERBS_TABLE)
    ]
    assert heavy == []
    assert "ctypes" not in seen["modules"]  # no secret is held, so nothing is made undumpable


def test_help_with_a_secret_set_is_executed_again_and_imports_nothing_heavy_either(repo, tmp_path):
    secret = {"FACTORY_WORKER_CREDENTIAL": "wc-startup-4d1f8e2a"}
    _, seen = started(["--help"], repo, tmp_path, env=secret)
    heavy = [
        m
        for m in seen["modules"]
        if m.split(".")[0] in ("pydantic", "yaml", "asyncio", "aiosqlite", "store")
        or (m.startswith("core") and m not in (*HOLDING_SECRETS, *VERBS_TABLE))
    ]
    assert heavy == []


def test_importing_the_domain_builds_no_model_until_one_is_used():
    code = textwrap.dedent(
        """
        import importlib, pkgutil, sys
        import core.domain
        from pydantic import BaseModel
        for info in pkgutil.iter_modules(core.domain.__path__, "core.domain."):
            importlib.import_module(info.name)
        def models(cls=BaseModel):
            for sub in cls.__subclasses__():
                yield sub
                yield from models(sub)
        domain = [m for m in models() if m.__module__.startswith("core.domain.")]
        print(len(domain), sorted(m.__name__ for m in domain if m.__pydantic_complete__))
        from core.domain.models import Usage
        Usage(input_tokens=3)
        print(Usage.__pydantic_complete__)
        """
    )
    done = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, cwd=ROOT, check=True
    )
    counted, built_after_use = done.stdout.splitlines()
    assert int(counted.split()[0]) > 20  # the domain's values, events, answers, decisions
    assert counted.split(maxsplit=1)[1] == "[]"
    assert built_after_use == "True"


def test_version_is_the_installed_distributions(t25, repo):
    done = t25("--version")
    project = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    assert done.code == 0, done.err
    assert done.out == f"t25 {metadata.version('t25')}\n"
    assert metadata.version("t25") == project["version"]


def test_the_adapter_names_are_the_names_of_the_shipped_specs():
    assert tuple(spec.name for spec in registry.builtin_specs()) == registry.BUILTIN_NAMES
