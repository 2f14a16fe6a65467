"""A small but real Python project, developed the way projects are: a src layout, a pytest
suite with a conftest, and a virtual environment *inside the checkout* holding the project
installed editable by a real `pip install -e .` (its `.pth` file names the checkout's
`src/`). The shape in which a check run in a worktree imports the main checkout's code.

The tools the project's environment needs - pytest, setuptools, wheel, and pre-commit for the
checks that run it - are installed once per test session into a shared virtual environment
(from the package index, locked so parallel test processes build it once) and reach each
project's environment through a `.pth` file; then `pip install -e .` itself runs offline, in
about a second.
"""

from __future__ import annotations

import fcntl
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from adapters.sandbox import bwrap_problem
from core.workspace.git import git_sync
from tests.support.repos import make_repo

TOOLS = ("pytest==8.4.2", "setuptools==80.9.0", "wheel==0.45.1", "pre-commit==4.7.0")
SITE = f"lib/python{sys.version_info.major}.{sys.version_info.minor}/site-packages"

PYPROJECT = """\
[build-system]
requires = ["setuptools>=64", "wheel"]
build-backend = "setuptools.build_meta"

[project]
name = "calc"
version = "1.0"

[tool.setuptools.packages.find]
where = ["src"]
"""
CALC = "def add(a, b):\n    return a + b\n"
TESTS = "from calc import add\n\n\ndef test_add():\n    assert add(2, 3) == 5\n"
CONFTEST = "import pytest\n\n\n@pytest.fixture\ndef two():\n    return 2\n"
MAKEFILE = "test:\n\t.venv/bin/python -m pytest -q -p no:cacheprovider\n"
IGNORED = ".venv/\n*.egg-info/\n__pycache__/\n.pytest_cache/\n/.factory/\n/t25.yaml\n"


def tools_venv(shared: Path) -> Path:
    """The session's tools environment under `shared`, built by the first process to ask."""
    venv = shared / "project-tools"
    shared.mkdir(parents=True, exist_ok=True)
    with open(shared / "project-tools.lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        if not (venv / "ready").exists():
            subprocess.run([sys.executable, "-m", "venv", venv], check=True, timeout=300)
            pip = [venv / "bin" / "python", "-m", "pip", "install", "-q", *TOOLS]
            subprocess.run(pip, check=True, timeout=600)
            (venv / "ready").write_text("")
    return venv


def make_project(where: Path, tools: Path) -> Path:
    """The project at `where/calc`: committed on `trunk`, its `.venv` (ignored) holding the
    editable install."""
    repo = make_repo(
        where / "calc",
        files={
            "pyproject.toml": PYPROJECT,
            ".gitignore": IGNORED,
            "README.md": "# calc\n",
        },
    )
    for name, text in {
        "src/calc/__init__.py": CALC,
        "tests/test_calc.py": TESTS,
        "tests/conftest.py": CONFTEST,
        "Makefile": MAKEFILE,
    }.items():
        (repo / name).parent.mkdir(parents=True, exist_ok=True)
        (repo / name).write_text(text)
    git_sync("add", "-A", cwd=repo)
    git_sync("commit", "-qm", "calc with tests", cwd=repo)
    venv = repo / ".venv"
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", venv], check=True, timeout=120)
    (venv / SITE / "project-tools.pth").write_text(str(tools / SITE) + "\n")
    install = [venv / "bin" / "python", "-m", "pip", "install", "-q", "--no-index"]
    install += ["--no-build-isolation", "--no-deps", "-e", repo]
    subprocess.run(install, check=True, timeout=300, capture_output=True)
    return repo


def shared_dir(tmp_path_factory) -> Path:
    """A folder every test process of this session shares (xdist's workers each have a
    base temp of their own below it)."""
    base = tmp_path_factory.getbasetemp()
    return base.parent if base.name.startswith("popen-gw") else base


LOGO = b"REAL LOGO: not a pointer\n"


def make_real_project(where: Path, tools: Path) -> Path:
    """`make_project`, shaped further like a real repository: a `.gitattributes`, a library
    as a submodule at `vendor/lib` (added from a local repository: no network), and - where
    `git lfs` is installed - `*.bin` in Git LFS with an asset committed through it."""
    repo = make_project(where, tools)
    lib = make_repo(where / "lib", "main", {"lib.txt": "v1\n"})
    attributes = "*.py text eol=lf\n"
    lfs = shutil.which("git-lfs") is not None
    if lfs:
        _git("lfs", "install", "--local", cwd=repo)
        attributes += "*.bin filter=lfs diff=lfs merge=lfs -text\n"
    (repo / ".gitattributes").write_text(attributes)
    if lfs:
        (repo / "assets").mkdir()
        (repo / "assets" / "logo.bin").write_bytes(LOGO)
    add = ["-c", "protocol.file.allow=always", "submodule", "add", "-q", str(lib), "vendor/lib"]
    _git(*add, cwd=repo)
    _git("add", "-A", cwd=repo)
    _git("commit", "-qm", "attributes, assets and the library", cwd=repo)
    return repo


def _git(*args: str, cwd: Path) -> str:
    """git as a developer runs it: filters (LFS's) and all."""
    done = subprocess.run(["git", *args], cwd=cwd, check=True, capture_output=True, text=True)
    return done.stdout.strip()


# The projects' checks run confined; where bubblewrap cannot, these tests skip (not in CI).
needs_bwrap = pytest.mark.skipif(
    bool(bwrap_problem()) and os.environ.get("T25_REQUIRE_PG") != "1",
    reason=f"bubblewrap cannot run here: {bwrap_problem()}",
)

# A dev run that adds `mul` to the sample project, with its test.
FEATURE = (
    r"scripted: write=src/calc/__init__.py:def add(a, b):\n    return a + b\n\n\n"
    r"def mul(a, b):\n    return a * b\n"
    "\n"
    r"scripted: write=tests/test_mul.py:from calc import mul\n\n\ndef test_mul():\n"
    r"    assert mul(2, 3) == 6\n"
)
