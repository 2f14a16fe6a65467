"""Each manifest kind's dependencies, and what a change adds to them."""

from __future__ import annotations

import pytest

from core.domain.manifests import ManifestChange, added_dependencies, declared, is_manifest


@pytest.mark.parametrize(
    ("path", "expected"),
    [
        ("requirements.txt", True),
        ("requirements-dev.txt", True),
        ("svc/requirements.txt", True),
        ("pyproject.toml", True),
        ("web/package.json", True),
        ("Cargo.toml", True),
        ("go.mod", True),
        ("Gemfile", True),
        ("package-lock.json", False),  # lock files follow their manifest
        ("go.sum", False),
        ("requirements.in", False),
        ("app.py", False),
    ],
)
def test_which_files_are_manifests(path, expected):
    assert is_manifest(path) is expected


def test_requirements_one_a_line_normalised_without_comments_or_options():
    text = (
        "# pinned\nRequests==2.31  # http\nflask[async]>=3\n"
        "-r base.txt\n-e .\n--index-url https://x\n\nzope.interface\n"
        "pkg_Name ; python_version < '3.12'\n"
    )
    assert declared("requirements.txt", text) == {
        "requests",
        "flask",
        "zope-interface",
        "pkg-name",
    }


def test_pyproject_pep621_optional_groups_and_poetry():
    text = """
[project]
dependencies = ["httpx>=0.27", "Pydantic"]
[project.optional-dependencies]
test = ["pytest<9"]
[dependency-groups]
lint = ["ruff", {include-group = "test"}]
[tool.poetry.dependencies]
python = "^3.12"
rich = "*"
[tool.poetry.group.docs.dependencies]
mkdocs = "*"
"""
    assert declared("pyproject.toml", text) == {
        "httpx",
        "pydantic",
        "pytest",
        "ruff",
        "rich",
        "mkdocs",
    }


def test_package_json_every_dependency_field():
    text = """{"name": "web", "dependencies": {"react": "^18"},
    "devDependencies": {"vite": "5"}, "peerDependencies": {"react-dom": "*"},
    "optionalDependencies": {"fsevents": "*"}, "scripts": {"build": "vite"}}"""
    assert declared("package.json", text) == {"react", "vite", "react-dom", "fsevents"}


def test_cargo_toml_tables_targets_and_workspace():
    text = """
[package]
name = "x"
[dependencies]
serde = "1"
tokio = { version = "1", features = ["full"] }
[dev-dependencies]
proptest = "1"
[build-dependencies]
cc = "1"
[target.'cfg(unix)'.dependencies]
libc = "0.2"
[workspace.dependencies]
anyhow = "1"
"""
    assert declared("Cargo.toml", text) == {"serde", "tokio", "proptest", "cc", "libc", "anyhow"}


def test_go_mod_direct_requires_single_and_in_blocks():
    text = """module example.com/app

go 1.22

require github.com/pkg/errors v0.9.1
require (
\tgolang.org/x/sync v0.7.0
\tgolang.org/x/sys v0.20.0 // indirect
)
"""
    assert declared("go.mod", text) == {"github.com/pkg/errors", "golang.org/x/sync"}


def test_gemfile_gem_lines():
    text = "source 'https://rubygems.org'\ngem 'rails', '~> 7.1'\n  gem \"pg\"\n# gem 'old'\n"
    assert declared("Gemfile", text) == {"rails", "pg"}


def test_a_file_that_does_not_parse_declares_nothing():
    assert declared("pyproject.toml", "[project\n") == set()
    assert declared("package.json", "{not json") == set()
    assert declared("package.json", "[1, 2]") == set()
    assert declared("Cargo.toml", "") == set()


def test_a_change_adds_what_the_task_branch_declares_and_the_default_branch_did_not():
    changes = [
        ManifestChange(
            path="requirements.txt", before="requests\nflask\n", after="Requests\nrich\n"
        ),
        ManifestChange(path="web/package.json", before=None, after='{"dependencies": {"a": "1"}}'),
        ManifestChange(path="go.mod", before="module m\n", after=None),  # deleted: adds none
    ]
    assert added_dependencies(changes) == ("requirements.txt: rich", "web/package.json: a")
    assert added_dependencies([]) == ()


def test_a_renamed_manifest_or_a_dependency_moved_within_its_ecosystem_adds_nothing():
    moved = [
        ManifestChange(path="requirements.txt", before="requests\nrich\n", after=None),
        ManifestChange(path="requirements-base.txt", before=None, after="requests\nrich\n"),
        ManifestChange(
            path="pyproject.toml", before=None, after='[project]\ndependencies = ["rich", "x"]\n'
        ),
        ManifestChange(path="package.json", before=None, after='{"dependencies": {"rich": "1"}}'),
    ]
    assert added_dependencies(moved) == ("package.json: rich", "pyproject.toml: x")
    twice = [
        ManifestChange(path="a/requirements.txt", after="httpx\n"),
        ManifestChange(path="b/requirements.txt", after="httpx\n"),
    ]
    assert added_dependencies(twice) == ("a/requirements.txt: httpx",)  # one dependency


@pytest.mark.parametrize(
    ("path", "text"),
    [
        ("package.json", '{"dependencies": ' + "[" * 200_000 + "]" * 200_000 + "}"),
        ("pyproject.toml", "a = " + "[" * 100_000 + "]" * 100_000),
        ("Cargo.toml", "x = " + "{ y = " * 50_000 + "1" + " }" * 50_000),
    ],
    ids=["package.json", "pyproject.toml", "Cargo.toml"],
)
def test_a_manifest_nested_without_end_declares_nothing_and_raises_nothing(path, text):
    # A dev agent writes the manifests these are read from: nested 100,000 deep, the TOML
    # and JSON decoders recurse past the stack. It is no manifest, and T25 goes on.
    assert declared(path, text) == set()
