"""t25.yaml: the shipped example, defaults, path resolution, and one-line errors that
name file, line and key (and never echo a secret)."""

from __future__ import annotations

import re
import textwrap
import typing
from pathlib import Path

import pytest
from pydantic import BaseModel, ValidationError

from core.config.policy_config import DEFAULT_PROTECTED_PATHS
from core.config.schema import AgentProfile, Config, default_config_text, find_config, load_config
from core.config.service_config import ServeConfig
from core.errors import ConfigError
from tests.support import CHECKOUT

REPO = CHECKOUT
EXAMPLE = REPO / "t25.yaml.example"
PACKAGED_EXAMPLE = REPO / "core" / "config" / "data" / "t25.yaml.example"

MINIMAL = "projects:\n  - name: app\n"


@pytest.fixture
def here(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """Work in tmp_path, so messages name the file as `t25.yaml`."""
    monkeypatch.chdir(tmp_path)
    monkeypatch.delenv("T25_DATABASE_URL", raising=False)
    return tmp_path


def write(directory: Path, text: str, name: str = "t25.yaml") -> Path:
    path = directory / name
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(textwrap.dedent(text).lstrip("\n"), encoding="utf-8")
    return path


def error_of(directory: Path, text: str) -> ConfigError:
    with pytest.raises(ConfigError) as caught:
        load_config(write(directory, text))
    message = str(caught.value)
    assert "\n" not in message, "a config error is one line"
    return caught.value


# -- the shipped example -----------------------------------------------------------------


def test_the_example_loads(here: Path) -> None:
    write(here, EXAMPLE.read_text(encoding="utf-8"))
    config = load_config(here / "t25.yaml")
    assert config.project().name == "app"
    assert config.project().repo == here.resolve()
    assert config.qa.checks[0].run == ["python", "-m", "pytest", "-q"]
    assert config.rate_for("claude-sonnet-4-5") is not None


def test_the_example_at_the_repo_root_is_the_packaged_one() -> None:
    assert EXAMPLE.read_bytes() == PACKAGED_EXAMPLE.read_bytes()
    assert default_config_text() == EXAMPLE.read_text(encoding="utf-8")


def _field_names(model: type[BaseModel], seen: set[type] | None = None) -> set[str]:
    seen = seen if seen is not None else set()
    if model in seen:
        return set()
    seen.add(model)
    names = set(model.model_fields)
    for field in model.model_fields.values():
        for nested in _models_in(field.annotation):
            names |= _field_names(nested, seen)
    return names


def _models_in(annotation: object) -> list[type[BaseModel]]:
    if isinstance(annotation, type) and issubclass(annotation, BaseModel):
        return [annotation]
    return [m for arg in typing.get_args(annotation) for m in _models_in(arg)]


def test_the_example_documents_every_key() -> None:
    text = EXAMPLE.read_text(encoding="utf-8")
    # A key counts whether it is set or shown commented out (`# security:`).
    keys = set(re.findall(r"^[ \t#]*(?:- )?([a-z_]+):", text, flags=re.MULTILINE))
    missing = _field_names(Config) - keys
    assert not missing, f"t25.yaml.example does not document: {sorted(missing)}"


def test_the_example_lists_the_default_protected_paths_as_they_are() -> None:
    text = EXAMPLE.read_text(encoding="utf-8")
    listed = text.split("# protected_paths:\n", 1)[1]
    shown = re.match(r"(?:#   - \S+\n)+", listed)
    assert shown is not None
    paths = tuple(line.removeprefix("#   - ") for line in shown.group(0).splitlines())
    assert paths == DEFAULT_PROTECTED_PATHS


# -- defaults and paths ------------------------------------------------------------------


def test_defaults(here: Path) -> None:
    config = load_config(write(here, MINIMAL))
    root = here.resolve()
    assert config.path == root / "t25.yaml"
    assert config.root == root
    assert config.project().repo == root
    assert config.project().default_branch is None
    assert config.project().prompts is None
    for role in ("spec", "planner", "dev", "qa", "reviewer", "docs"):
        assert config.roles.chain(role) == [AgentProfile(adapter="claude")]
    assert config.roles.security is None
    assert config.limits.max_files_changed == 25
    assert config.limits.max_diff_lines == 1000
    assert (config.limits.max_review_loops, config.limits.max_qa_loops) == (2, 2)
    assert config.limits.run_timeout_s == 1800
    assert config.limits.workers == 2
    assert config.approval.require_for_risk == ["high"]
    assert config.approval.requires_approval("high")
    assert not config.approval.requires_approval("medium")
    assert config.qa.checks == []
    assert config.cost.rates == {}
    assert config.worktrees.root == root / ".factory" / "worktrees"
    assert config.store_url == f"sqlite:///{root}/.factory/t25.db"
    assert (config.serve.host, config.serve.port) == ("127.0.0.1", 8725)


def test_relative_paths_resolve_against_the_config_directory(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv("T25_DATABASE_URL", raising=False)
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    monkeypatch.chdir(elsewhere)
    (tmp_path / "code" / "app").mkdir(parents=True)
    (tmp_path / "abs").mkdir()
    path = write(
        tmp_path / "conf",
        f"""
        projects:
          - name: app
            repo: ../code/app
            prompts: prompts
          - name: abs
            repo: {tmp_path / "abs"}
        worktrees:
          root: wt
        store:
          url: sqlite:///data/t25.db
    """,
    )
    config = load_config(path)
    conf = (tmp_path / "conf").resolve()
    assert config.project("app").repo == (tmp_path / "code" / "app").resolve()
    assert config.project("app").prompts == conf / "prompts"
    assert config.project("abs").repo == tmp_path / "abs"
    assert config.worktrees.root == conf / "wt"
    assert config.store_url == f"sqlite:///{conf}/data/t25.db"
    assert config.store_url.startswith("sqlite:////")


def test_an_absolute_sqlite_url_is_kept(here: Path) -> None:
    config = load_config(write(here, MINIMAL + "store:\n  url: sqlite:////var/lib/t25.db\n"))
    assert config.store_url == "sqlite:////var/lib/t25.db"


def test_t25_database_url_overrides_the_file(here: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    config = load_config(write(here, MINIMAL))
    monkeypatch.setenv("T25_DATABASE_URL", "postgresql://t25:pw@db.example/t25")
    assert config.store_url == "postgresql://t25:pw@db.example/t25"
    monkeypatch.setenv("T25_DATABASE_URL", "")
    assert config.store_url.startswith("sqlite:////")


def test_a_full_file_is_read_as_written(here: Path) -> None:
    config = load_config(
        write(
            here,
            """
        projects:
          - name: app
            default_branch: trunk
          - name: web.v2
        roles:
          dev:
            - {adapter: claude, model: claude-sonnet-4-5, args: [--verbose], timeout_s: 600}
            - adapter: codex
          security:
            - adapter: gemini
        limits: {max_files_changed: 5, max_review_loops: 0, run_timeout_s: 60}
        approval: {require_for_risk: [medium, high]}
        cost:
          rates:
            claude-sonnet-4-5: {input: 3, output: 15.0}
        serve: {bind: "[::1]:9000"}
    """,
        )
    )
    dev = config.roles.chain("dev")
    assert dev is not None and [p.adapter for p in dev] == ["claude", "codex"]
    assert dev[0].args == ["--verbose"]
    assert config.timeout_for(dev[0]) == 600
    assert config.timeout_for(dev[1]) == 60
    assert config.roles.chain("security") == [AgentProfile(adapter="gemini")]
    assert config.project().default_branch == "trunk"
    assert config.project("web.v2").name == "web.v2"
    assert config.limits.max_files_changed == 5 and config.limits.max_review_loops == 0
    assert config.approval.requires_approval("medium")
    rate = config.rate_for("claude-sonnet-4-5-20250929")  # priced by its longest prefix
    assert rate is not None and (rate.input, rate.output, rate.cache_read) == (3.0, 15.0, 0.0)
    assert config.rate_for("gpt-5") is None and config.rate_for(None) is None
    assert (config.serve.host, config.serve.port) == ("::1", 9000)


def test_an_unknown_project_lists_the_known_ones(here: Path) -> None:
    config = load_config(write(here, "projects:\n  - name: app\n  - name: web\n"))
    with pytest.raises(ConfigError, match=r"unknown project 'api' \(known: app, web\)"):
        config.project("api")


def test_config_is_immutable(here: Path) -> None:
    config = load_config(write(here, MINIMAL))
    with pytest.raises(ValidationError):
        config.limits.workers = 9  # type: ignore[misc]


def test_serve_bind_parts() -> None:
    assert (ServeConfig(bind="0.0.0.0:80").host, ServeConfig(bind="0.0.0.0:80").port) == (
        "0.0.0.0",
        80,
    )


# -- one-line errors: file, line, key, what was expected ---------------------------------


def test_an_unknown_top_level_key_names_its_line_and_the_close_match(here: Path) -> None:
    err = error_of(
        here,
        """
        projects:
          - name: app
        limts:
          workers: 2
    """,
    )
    assert str(err) == (
        "t25.yaml:3: limts: unknown key (known: projects, roles, limits, approval, policies, qa, "
        "cost, sandbox, worktrees, store, serve, audit, cockpit, keys, merge); did you mean 'limits'?"
    )
    assert err.hint and "t25.yaml.example" in err.hint


KNOWN_ADAPTERS = ("claude", "codex", "gemini", "opencode", "aider", "scripted")


def test_an_unknown_adapter_names_its_line_the_known_ones_and_the_close_match(here: Path) -> None:
    path = write(
        here,
        """
        projects:
          - name: app
        roles:
          dev:
            - adapter: codex
            - adapter: clade
    """,
    )
    with pytest.raises(ConfigError) as caught:
        load_config(path, adapters=KNOWN_ADAPTERS)
    assert str(caught.value) == (
        "t25.yaml:6: roles.dev[1].adapter: unknown adapter 'clade' (known: aider, claude, "
        "codex, gemini, opencode, scripted); did you mean 'claude'?"
    )
    with pytest.raises(ConfigError, match=r"unknown adapter 'zzz' \(known: [a-z, ]+\)$"):
        load_config(
            write(
                here, "projects: [{name: app}]\nroles: {qa: [{adapter: zzz}]}\n", name="other.yaml"
            ),
            adapters=KNOWN_ADAPTERS,
        )
    # Without the caller's names (core does not know the registry) any name is kept.
    assert load_config(path).roles.chain("dev")[1].adapter == "clade"


def test_a_repo_that_does_not_exist_names_its_line_and_path(here: Path) -> None:
    err = error_of(
        here,
        """
        projects:
          - name: app
          - name: gone
            repo: ../nowhere
    """,
    )
    assert str(err) == f"t25.yaml:4: projects[1].repo: {here.parent / 'nowhere'} does not exist"
    (here / "a-file").write_text("")
    err = error_of(here, "projects:\n  - name: app\n    repo: a-file\n")
    assert str(err) == f"t25.yaml:3: projects[0].repo: {here / 'a-file'} is not a directory"


def test_a_config_from_another_host_is_not_checked_against_this_one(here: Path) -> None:
    # What a remote cockpit receives from `t25 serve` names the serve host's directories.
    sent = {"projects": [{"name": "app", "repo": "/srv/on/the/serve/host"}]}
    assert Config.model_validate(sent).project().repo == Path("/srv/on/the/serve/host")


def test_an_unknown_role_lists_the_known_roles(here: Path) -> None:
    err = error_of(
        here,
        """
        projects:
          - name: app
        roles:
          spec:
            - adapter: claude
          devv:
            - adapter: claude
    """,
    )
    assert str(err) == (
        "t25.yaml:6: roles.devv: unknown key (known: spec, planner, dev, qa, reviewer, "
        "security, docs); did you mean 'dev'?"
    )


def test_an_unknown_key_inside_a_profile_in_a_list(here: Path) -> None:
    err = error_of(
        here,
        """
        projects:
          - name: app
        roles:
          dev:
            - adapter: claude
            - adapter: codex
              args: []
              modle: gpt-5
    """,
    )
    assert str(err) == (
        "t25.yaml:8: roles.dev[1].modle: unknown key (known: adapter, model, args, timeout_s, "
        "env_passthrough, private_home, sandbox, sandbox_image, resume, tools); "
        "did you mean 'model'?"
    )


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        (
            "limits:\n  max_diff_lines: lots\n",
            "t25.yaml:4: limits.max_diff_lines: expected a whole number, got 'lots'",
        ),
        (
            "limits:\n  max_diff_lines: '25'\n",  # no quiet coercion of text to numbers
            "t25.yaml:4: limits.max_diff_lines: expected a whole number, got '25'",
        ),
        (
            "limits:\n  workers: 0\n",
            "t25.yaml:4: limits.workers: expected a number greater than 0, got 0",
        ),
        ("limits: 5\n", "t25.yaml:3: limits: expected a mapping of keys, got 5"),
        (
            "approval:\n  require_for_risk: [hgih]\n",
            (
                "t25.yaml:4: approval.require_for_risk[0]: expected one of 'low', 'medium' or 'high', "
                "got 'hgih'"
            ),
        ),
        (
            "qa:\n  checks:\n    - name: tests\n      run: [pytest]\n      required: maybe\n",
            "t25.yaml:7: qa.checks[0].required: expected true or false, got 'maybe'",
        ),
        (
            "cost:\n  rates:\n    gpt-4.1: {input: 2}\n",
            't25.yaml:5: cost.rates["gpt-4.1"].output: required key is missing',
        ),
        (
            "roles:\n  security: []\n",
            "t25.yaml:4: roles.security: expected at least one item, got 0",
        ),
        (
            "policies:\n  protected_paths: [package.json, 'ci dir/**']\n",
            (
                "t25.yaml:4: policies.protected_paths: expected path patterns such as "
                ".github/workflows/** or package.json (no spaces, backslashes or '!'), "
                "got 'ci dir/**'"
            ),
        ),
        (
            "policies:\n  extra_protected_paths: infra/**\n",
            "t25.yaml:4: policies.extra_protected_paths: expected a list, got 'infra/**'",
        ),
        (
            "store:\n  url: mysql://db/t25\n",
            (
                "t25.yaml:4: store.url: expected sqlite:///path/to/file.db or postgresql://host/db, "
                "got 'mysql://db/t25'"
            ),
        ),
        (
            "serve:\n  bind: localhost\n",
            "t25.yaml:4: serve.bind: expected host:port such as 127.0.0.1:8725, got 'localhost'",
        ),
    ],
)
def test_a_wrong_value_names_line_key_and_expectation(here: Path, text: str, expected: str) -> None:
    assert str(error_of(here, MINIMAL + text)) == expected


def test_a_project_needs_a_valid_name(here: Path) -> None:
    assert str(error_of(here, "projects:\n  - repo: .\n")) == (
        "t25.yaml:2: projects[0].name: required key is missing"
    )
    assert str(error_of(here, "projects:\n  - name: My App\n")).startswith(
        "t25.yaml:2: projects[0].name: expected lowercase letters"
    )
    assert str(error_of(here, "roles: {}\n")) == "t25.yaml:1: projects: required key is missing"


def test_a_qa_command_written_as_a_string_asks_for_a_list(here: Path) -> None:
    err = error_of(
        here,
        MINIMAL
        + textwrap.dedent("""\
        qa:
          checks:
            - name: tests
              run: python -m pytest -q
    """),
    )
    assert str(err) == (
        "t25.yaml:6: qa.checks[0].run: expected a list of arguments such as "
        "[python, -m, pytest, -q], got a string; T25 never runs a command through a shell"
    )


def test_a_role_given_one_profile_instead_of_a_list(here: Path) -> None:
    err = error_of(here, MINIMAL + "roles:\n  dev:\n    adapter: claude\n")
    assert str(err).startswith("t25.yaml:4: roles.dev: expected a list of agent profiles")


def test_several_errors_report_the_first_by_line_and_count_the_rest(here: Path) -> None:
    err = error_of(
        here,
        """
        projects:
          - name: app
        serve:
          bind: nowhere
        limits:
          workers: x
          max_qa_loops: y
    """,
    )
    assert str(err) == (
        "t25.yaml:4: serve.bind: expected host:port such as 127.0.0.1:8725, got 'nowhere' "
        "(and 2 more)"
    )


def test_a_key_written_twice_is_an_error(here: Path) -> None:
    err = error_of(here, MINIMAL + "limits:\n  workers: 1\n  workers: 4\n")
    assert str(err) == (
        "t25.yaml:5: limits.workers: duplicate key (first set on line 4); a key may appear once"
    )


def test_a_forge_merge_needs_each_project_s_pull_request_and_a_repository_named_so(
    here: Path,
) -> None:
    err = error_of(here, MINIMAL + "merge:\n  via: forge\n")
    assert "merge.via forge merges pull requests through the forge: give app a " in str(err)
    watched = "projects:\n  - name: app\n    pull_request:\n      repo: shop\n"
    err = error_of(here, watched)
    assert str(err).startswith("t25.yaml:4: projects[0].pull_request.repo: ")
    assert "'shop' is no repository of a forge: name it owner/name" in str(err)


def test_duplicate_project_names_are_refused(here: Path) -> None:
    err = error_of(here, "projects:\n  - name: app\n  - name: app\n")
    assert "two projects are named 'app'" in str(err)


@pytest.mark.parametrize(
    ("text", "line", "problem"),
    [
        ("projects:\n  - name: app\n limits: x\n", 3, "is this line indented like"),
        ("projects:\n\t- name: app\n", 2, "a tab character; indent with spaces"),
        ("projects: [app\n", 2, "invalid YAML"),
        ("projects: []\n---\nlimits: {}\n", 2, "expected a single document"),
    ],
)
def test_a_yaml_syntax_error_names_the_line(here: Path, text: str, line: int, problem: str) -> None:
    err = error_of(here, text)
    assert str(err).startswith(f"t25.yaml:{line}: invalid YAML: ")
    assert problem in str(err)
    assert err.hint == f"check the indentation and quoting near line {line}"


@pytest.mark.parametrize("text", ["", "\n", "# only a comment\n"])
def test_an_empty_file(here: Path, text: str) -> None:
    err = error_of(here, text)
    assert str(err) == "t25.yaml:1: the file is empty; expected at least a `projects:` list"
    assert err.hint and "t25 init" in err.hint


@pytest.mark.parametrize(("text", "got"), [("- app\n- web\n", "a list"), ("app\n", "'app'")])
def test_a_top_level_that_is_not_a_mapping(here: Path, text: str, got: str) -> None:
    assert str(error_of(here, text)) == (
        f"t25.yaml:1: expected keys such as `projects:` at the top level, got {got}"
    )


def test_a_missing_file_points_at_t25_init(here: Path) -> None:
    with pytest.raises(ConfigError) as caught:
        load_config(here / "t25.yaml")
    assert str(caught.value) == "t25.yaml: no such file"
    assert caught.value.hint == "run `t25 init` to create one"


def test_a_file_outside_the_working_directory_is_named_in_full(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    (tmp_path / "cwd").mkdir()
    monkeypatch.chdir(tmp_path / "cwd")
    path = write(tmp_path / "conf", MINIMAL + "limits: {workers: x}\n")
    with pytest.raises(ConfigError, match=re.escape(f"{path}:3: limits.workers: ")):
        load_config(path)


# -- credentials are refused, and never echoed -------------------------------------------

PROVIDER = "ANTHROPIC_API_KEY"
SECRETS = [
    # (yaml after MINIMAL, the secret, line, key, where it belongs)
    (
        "roles:\n  dev:\n    - adapter: claude\n      args: [--api-key, {s}]\n",
        "sk-ant-api03-Zx8QvL2mN4pR7sT1uW3yA5bC",
        6,
        "roles.dev[0].args[1]",
        PROVIDER,
    ),
    (
        "roles:\n  dev:\n    - adapter: codex\n      args: ['--key={s}']\n",
        "sk-proj-Q2w3E4r5T6y7U8i9O0pLkJhG",
        6,
        "roles.dev[0].args[0]",
        PROVIDER,
    ),
    (
        "roles:\n  spec:\n    - adapter: gemini\n      model: {s}\n",
        "AIzaSyA1b2C3d4E5f6G7h8I9j0K1l2M3n4O5p6Q",
        6,
        "roles.spec[0].model",
        PROVIDER,
    ),
    (
        "qa:\n  checks:\n    - name: gh\n      run: [gh, --token, {s}]\n",
        "ghp_16C7e42F292c6912E7710c838347Ae178B4a",
        6,
        "qa.checks[0].run[2]",
        "GH_TOKEN",
    ),
    (
        "qa:\n  checks:\n    - name: api\n      run: [curl, -H, 'Authorization: {s}']\n",
        "Bearer eyJhbGciOiJIUzI1NiJ9.e30.ZRrHA1JJJW",
        6,
        "qa.checks[0].run[2]",
        "environment",
    ),
    (
        "projects_note: {s}\n",
        "github_pat_11ABCDEFG0123456789_abcdefghij",
        3,
        "projects_note",
        "GH_TOKEN",
    ),
    (
        "roles:\n  dev:\n    - adapter: aider\n      args: [{s}]\n",
        "AKIAIOSFODNN7EXAMPLE",
        6,
        "roles.dev[0].args[0]",
        "AWS_ACCESS_KEY_ID",
    ),
    (
        "store:\n  url: {s}\n",
        "postgresql://t25:hunter2@db.example/t25",
        4,
        "store.url",
        "T25_DATABASE_URL",
    ),
    (
        "serve:\n  worker_credential: {s}\n",
        "wc-2f9a7c",
        4,
        "serve.worker_credential",
        "FACTORY_WORKER_CREDENTIAL",
    ),
    (
        "roles:\n  dev:\n    - adapter: claude\n      api_key: {s}\n",
        "not-a-known-shape",
        6,
        "roles.dev[0].api_key",
        PROVIDER,
    ),
    ("store:\n  password: {s}\n", "hunter2", 4, "store.password", "T25_DATABASE_URL"),
]


@pytest.mark.parametrize(("snippet", "secret", "line", "key", "where"), SECRETS)
def test_a_credential_is_refused_without_echoing_it(
    here: Path, snippet: str, secret: str, line: int, key: str, where: str
) -> None:
    err = error_of(here, MINIMAL + snippet.format(s=secret))
    message = str(err)
    assert message.startswith(f"t25.yaml:{line}: {key}: ")
    assert "secrets never go in t25.yaml" in message
    assert where in message
    assert secret not in message and secret not in (err.hint or "")


def test_a_key_that_is_itself_a_secret_is_not_printed(here: Path) -> None:
    secret = "ghp_16C7e42F292c6912E7710c838347Ae178B4a"
    err = error_of(here, MINIMAL + f"cost:\n  rates:\n    {secret}: {{input: 1, output: 1}}\n")
    assert str(err).startswith("t25.yaml:4: cost.rates: holds a key that looks like a GitHub token")
    assert secret not in str(err)


def test_lookalikes_are_not_credentials(here: Path) -> None:
    config = load_config(
        write(
            here,
            MINIMAL
            + textwrap.dedent("""\
        roles:
          dev:
            - adapter: claude
              args: [--dangerously-skip-permissions, --max-tokens, "4096"]
        store:
          url: postgresql://t25@db.example/t25
    """),
        )
    )
    assert config.store.url == "postgresql://t25@db.example/t25"


# -- finding the file --------------------------------------------------------------------


def test_find_config_walks_up_to_the_nearest_file(tmp_path: Path) -> None:
    (tmp_path / ".git").mkdir()
    path = write(tmp_path, MINIMAL)
    nested = tmp_path / "src" / "pkg"
    nested.mkdir(parents=True)
    assert find_config(nested) == path
    assert find_config(tmp_path) == path


def test_find_config_stops_at_the_git_repository_root(tmp_path: Path) -> None:
    write(tmp_path, MINIMAL)  # above the repository: not this repository's config
    repo = tmp_path / "repo"
    (repo / "sub").mkdir(parents=True)
    (repo / ".git").write_text("gitdir: /elsewhere\n")  # a worktree's .git is a file
    with pytest.raises(ConfigError) as caught:
        find_config(repo / "sub")
    assert str(caught.value) == f"no t25.yaml in {repo / 'sub'} or above it (up to {repo})"
    assert caught.value.hint == "run `t25 init` to create one"


def test_an_explicit_path_wins(tmp_path: Path) -> None:
    write(tmp_path, MINIMAL)
    other = write(tmp_path / "ops", MINIMAL, name="factory.yaml")
    assert find_config(tmp_path, explicit=other) == other
    with pytest.raises(ConfigError, match="no such file") as caught:
        find_config(tmp_path, explicit=tmp_path / "nope.yaml")
    assert caught.value.hint and "--config" in caught.value.hint


def test_a_project_overrides_the_keys_it_names_and_keeps_the_rest(here: Path) -> None:
    other = here / "other"
    other.mkdir()
    text = textwrap.dedent("""\
        projects:
          - name: app
          - name: other
            repo: other
            roles:
              dev: [{adapter: codex}]
            limits:
              max_diff_lines: 5000
            qa:
              checks: [{name: lint, run: [ruff, check]}]
            approval:
              require_for_risk: [medium, high]
        limits:
          max_files_changed: 9
        qa:
          checks: [{name: tests, run: [pytest]}]
    """)
    config = load_config(write(here, text))
    app, own = config.for_project("app"), config.for_project("other")
    assert app is config  # no overrides: the top-level policy itself
    assert own.roles.dev == [AgentProfile(adapter="codex")]
    assert own.roles.reviewer == config.roles.reviewer  # a role it does not name
    assert (own.limits.max_diff_lines, own.limits.max_files_changed) == (5000, 9)
    assert [c.name for c in own.qa.checks] == ["lint"]
    assert own.approval.require_for_risk == ["medium", "high"]
    assert config.limits.max_diff_lines == 1000  # the top level is untouched
    assert config.project("other").overrides() == [
        "roles.dev codex",
        "limits.max_diff_lines 5000",
        "qa.checks lint",
        "approval.require_for_risk medium, high",
    ]
    with pytest.raises(ConfigError, match="unknown project 'nope'"):
        config.for_project("nope")


def test_a_projects_override_is_checked_like_the_top_level_and_names_its_line(here: Path) -> None:
    err = error_of(here, "projects:\n  - name: app\n    limits:\n      max_dif_lines: 5\n")
    assert str(err).startswith("t25.yaml:4: projects[0].limits.max_dif_lines: unknown key")
    err = error_of(here, "projects:\n  - name: app\n    limits:\n      workers: 8\n")
    assert str(err).startswith(
        "t25.yaml:3: projects[0].limits: workers is how many runs this T25 process works"
    )


@pytest.mark.parametrize(
    "home", ["private_home: true", "sandbox: bwrap", "sandbox: null", "private_home: false"]
)
def test_resume_needs_the_clis_own_home_where_its_sessions_are_kept(here: Path, home: str) -> None:
    err = error_of(
        here,
        f"""
        projects:
          - name: app
        roles:
          dev:
            - adapter: claude
              resume: true
              {home}
        """,
    )
    assert "resume: true needs the CLI's own HOME" in str(err)
    assert "set private_home: false and sandbox: none" in str(err)


def test_resume_with_the_clis_own_home_loads(here: Path) -> None:
    write(
        here,
        """
        projects:
          - name: app
        roles:
          dev:
            - adapter: claude
              resume: true
              sandbox: none
        """,
    )
    (profile,) = load_config(here / "t25.yaml").roles.dev
    assert profile.resume and not profile.private_home and profile.sandbox == "none"
