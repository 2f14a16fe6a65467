"""The whole pipeline on a project shaped like a real one (tests/support/projects.py): a src layout
installed editable into a virtual environment inside the checkout, a pytest suite with a
conftest, a `.gitattributes`, a library as a submodule and, where `git lfs` is installed, an
asset in Git LFS. Played once by the scripted agent and once with a real CLI as the
developer, against the fake model; each task's checks run the project's own suite through
the checkout's environment, and what merges is what was tested."""

from __future__ import annotations

import asyncio
import shutil
import subprocess
from pathlib import Path

import pytest

from adapters.base import CliAdapter
from adapters.checks import run_check
from adapters.registry import builtin_adapters
from adapters.sandbox import bwrap_problem
from adapters.scripted import ScriptedSpec
from core.domain.models import TaskState
from core.workspace.git import git_sync
from t25_tui.runtime import local_sweeper
from tests.support import projects
from tests.support.pipeline import Env
from tests.support.projects import LOGO, make_real_project, shared_dir, tools_venv
from tests.support.real_clis import need, profile

S = TaskState
LFS = shutil.which("git-lfs") is not None
POINTER = "version https://git-lfs.github.com/spec/v1"

pytestmark = pytest.mark.skipif(bool(bwrap_problem()), reason=f"{bwrap_problem()}")

FEATURE = projects.FEATURE + "\n" + r"scripted: write=assets/new.bin:NEW ASSET\n" + "\n"
# What the checks find in the tree: the LFS asset's content, not its pointer, and the library.
SHAPES = (
    "import pathlib\n"
    f"assert not {LFS} or pathlib.Path('assets/logo.bin').read_bytes() == {LOGO!r}\n"
    "assert pathlib.Path('vendor/lib/lib.txt').read_text() == 'v1\\n'\n"
)


@pytest.fixture(scope="session")
def tools(tmp_path_factory) -> Path:
    return tools_venv(shared_dir(tmp_path_factory))


@pytest.fixture
async def factory(tmp_path, tools):
    e = Env(make_real_project(tmp_path, tools))
    yield e
    await e.close()


def checks(repo: Path, *extra: list[str]) -> list[dict]:
    python = str(repo / ".venv" / "bin" / "python")
    runs = [[python, "-m", "pytest", "-q", "-p", "no:cacheprovider"], [python, "-c", SHAPES]]
    runs += [[python, *argv] for argv in extra]
    return [{"name": f"check-{i}", "run": run} for i, run in enumerate(runs)]


async def work(factory: Env, *, real: bool = False) -> None:
    adapters = {"scripted": CliAdapter(ScriptedSpec())}
    if real:
        adapters = {**builtin_adapters(), **adapters}
    sweeper = local_sweeper(factory.control, adapters, run_check, heartbeat_s=0.5)
    await asyncio.wait_for(sweeper.work(), 240)


def main_suite(repo: Path) -> str:
    python = repo / ".venv" / "bin" / "python"
    argv = [python, "-m", "pytest", "-q", "-p", "no:cacheprovider"]
    return subprocess.run(argv, cwd=repo, capture_output=True, text=True).stdout


async def test_the_scripted_pipeline_on_a_real_project_tests_and_merges_the_change(factory, tools):
    library = git_sync("rev-parse", "trunk:vendor/lib", cwd=factory.repo)
    control = await factory.open(
        qa={"checks": checks(factory.repo)},
        sandbox={"mode": "required", "read_paths": [str(tools)]},
        limits={"max_files_changed": 10},
    )
    task = await control.new_task("Multiply", actor="ana", description=FEATURE)
    await work(factory)
    task = await factory.task(task.id)
    assert task.state is S.DONE and task.checks_passed, (task.state, task.error)
    asset = git_sync("cat-file", "blob", f"{task.branch}:assets/new.bin", cwd=factory.repo)
    assert asset.startswith(POINTER) if LFS else asset == "NEW ASSET"  # committed through LFS
    task = await control.merge(task.id, actor="ana")
    assert task.merged
    assert "2 passed" in await asyncio.to_thread(main_suite, factory.repo)
    assert (factory.repo / "assets" / "new.bin").read_bytes() == b"NEW ASSET\n"
    if LFS:
        assert (factory.repo / "assets" / "logo.bin").read_bytes() == LOGO
    assert git_sync("rev-parse", "trunk:vendor/lib", cwd=factory.repo) == library
    assert git_sync("status", "--porcelain", cwd=factory.repo) == ""


async def test_a_real_cli_as_the_developer_of_a_real_project(factory, tools, fake):
    """Claude Code writes a new module; the checks import it through the checkout's
    editable install - which names the checkout's `src/` - so they pass only because they
    see the task's tree there."""
    need("claude")
    fake.file = "src/calc/greet.py"
    fake.content = "def greet():\n    return 'hello'\n"
    imports = ["-c", "from calc.greet import greet; assert greet() == 'hello'"]
    control = await factory.open(
        roles={"dev": [profile("claude", fake)]},
        qa={"checks": checks(factory.repo, imports)},
        sandbox={"mode": "required", "read_paths": [str(tools)]},
    )
    task = await control.new_task("Greet", actor="ana")
    await work(factory, real=True)
    task = await factory.task(task.id)
    assert task.state is S.DONE and task.checks_passed, (task.state, task.error)
    assert (await control.merge(task.id, actor="ana")).merged
    python = str(factory.repo / ".venv" / "bin" / "python")
    argv = [python, "-c", "import calc.greet"]
    done = await asyncio.to_thread(subprocess.run, argv, cwd=factory.repo)
    assert done.returncode == 0  # the main checkout has it now, merged
