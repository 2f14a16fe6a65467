"""What one task sends to the model with each real agent CLI: T25's configuration against
the CLI's defaults, per stage, measured on the requests themselves.

For each of the five CLIs, one task goes through the whole pipeline (every role played by
that CLI, one worker, one review send-back) against T25's fake model server, which logs
every request it is sent:

  * defaults  the profile says `tools: cli`: the CLI's own tool set and features;
  * t25       the profile leaves `tools` out: the role's own narrow tool set;
  * resume    as t25, with `resume: true`: the send-back continues the dev agent's session
              instead of starting it cold.

Each request is split the way its API is (Anthropic `system`/`tools`/`messages`, OpenAI
Responses `instructions` and developer turns/`tools`/`input`, Chat Completions
`messages[role=system]`/`tools`/the other messages, Gemini `systemInstruction`/`tools`/
`contents`: tests/support/fakemodel/parts.py) and its parts measured in bytes of compact JSON (a
string: its UTF-8 bytes). Tokens are estimated as bytes / 4, the
rule of thumb for English text and JSON; no tokenizer is run. A configuration this build of
T25 refuses (`tools` or `resume` unknown to its t25.yaml) is printed as "n/a — not supported
by this build".

Run by hand (the real CLIs from .tools, as tests/e2e/real_clis finds them):

    .venv/bin/python bench/tokens.py [--clis claude,codex] [--no-resume] [--model M]

With `--model`, every profile names that model (a CLI whose prompt depends on the model,
as Claude Code's does, is measured per model); each CLI's heading names the model it ran.

Figures, not a test: nothing here asserts on size; but it exits non-zero unless each task it
measures was delivered: it ended DONE, every one of its runs asked the model, and the review
sent it back once (a second IMPLEMENTING run).
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import sys
import tempfile
from dataclasses import dataclass, field
from pathlib import Path

import yaml

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from checked import happened

from adapters.base import CliAdapter, CliAdapterSpec
from adapters.checks import run_check
from adapters.codex import HEADLESS_CONFIG
from adapters.registry import builtin_specs
from core.config.schema import load_config
from core.control.service import ControlPlane
from core.domain.agent import AgentRequest, AgentResult
from core.domain.models import TaskState
from core.errors import ConfigError
from core.workspace.git import git_sync
from store import open_store
from t25_tui.runtime import local_sweeper
from tests.support.fakemodel.parts import Parts, parts
from tests.support.fakemodel.server import FakeModel
from tests.support.real_clis import AIDER_DIR, BIN_DIR, EVERY_STAGE, MODELS, profile

CLIS = ("claude", "codex", "gemini", "opencode", "aider")
NOT_SUPPORTED = "n/a — not supported by this build"
BYTES_PER_TOKEN = 4

# The first review's answer: one blocking finding, so the task goes back to the dev agent.
FINDINGS = json.dumps(
    {
        "summary": "one change needed",
        "findings": [
            {"severity": "major", "message": "greeting.txt should end with a newline"},
        ],
    }
)


# -- one task through the pipeline, its requests noted per run --------------------------------


@dataclass
class StageRun:
    """One agent run: its stage, and the fake's requests it made."""

    label: str
    requests: list[dict]

    @property
    def sent(self) -> Parts:
        return sum((parts(r) for r in self.requests), Parts())


class Metered(CliAdapter):
    """A real CLI's adapter that gives the fake model each stage's answer and notes which of
    its requests each run made (one worker: runs never overlap)."""

    def __init__(self, spec: CliAdapterSpec, fake: FakeModel, runs: list[StageRun]) -> None:
        super().__init__(spec)
        self.fake, self.runs = fake, runs
        self.reviews = 0

    async def run(self, request: AgentRequest, sink, abort) -> AgentResult:
        if request.stage is TaskState.REVIEW:
            self.reviews += 1
        self.fake.final = (
            FINDINGS if self.reviews == 1 and request.stage is TaskState.REVIEW else EVERY_STAGE
        )
        start = len(self.fake.requests)
        result = await super().run(request, sink, abort)
        seen = [r.label.split(" #")[0] for r in self.runs].count(request.stage.value)
        label = request.stage.value + (f" #{seen + 1}" if seen else "")
        self.runs.append(StageRun(label, self.fake.requests[start:]))
        return result


@dataclass
class Outcome:
    runs: list[StageRun] = field(default_factory=list)
    state: str = ""
    error: str | None = None
    refused: str | None = None  # the config this build refused, and why

    def sent(self) -> Parts:
        return sum((r.sent for r in self.runs), Parts())


def make_repo(path: Path) -> Path:
    path.mkdir(parents=True)
    git_sync("init", "-q", "-b", "trunk", cwd=path)
    git_sync("config", "user.email", "bench@t25.invalid", cwd=path)
    git_sync("config", "user.name", "bench", cwd=path)
    (path / "app.py").write_text("def hello():\n    return 'hi'\n")
    git_sync("add", "-A", cwd=path)
    git_sync("commit", "-q", "-m", "init", cwd=path)
    (path / ".git" / "info" / "exclude").write_text("/.factory/\n/t25.yaml\n")
    return path


def config_for(cli: str, fake: FakeModel, extra: dict) -> dict:
    entry = {**profile(cli, fake), "timeout_s": 300, **extra}
    return {
        "projects": [{"name": "bench", "repo": "."}],
        "roles": {role: [entry] for role in ("spec", "planner", "dev", "qa", "reviewer", "docs")},
        "limits": {"workers": 1, "max_review_loops": 2, "max_qa_loops": 1, "run_timeout_s": 300},
        "qa": {"checks": [{"name": "unit", "run": [sys.executable, "-c", "pass"]}]},
        "policies": {"reviewer_differs_from_author": "off"},
    }


async def one_task(cli: str, fake: FakeModel, extra: dict, where: Path) -> Outcome:
    repo = make_repo(where)
    (repo / "t25.yaml").write_text(yaml.safe_dump(config_for(cli, fake, extra)))
    try:
        config = load_config(repo / "t25.yaml")
    except ConfigError as exc:
        return Outcome(refused=str(exc))
    outcome = Outcome()
    spec = next(s for s in builtin_specs() if s.name == cli)
    store = await open_store(config.store_url)
    try:
        control = ControlPlane(config, store)
        await control.sync_projects()
        adapters = {cli: Metered(spec, fake, outcome.runs)}
        sweeper = local_sweeper(control, adapters, run_check, heartbeat_s=0.5)
        task = await control.new_task("Add a greeting file", actor="bench")
        await asyncio.wait_for(sweeper.work(), 1800)
        task = await control.task(task.id)
        outcome.state, outcome.error = task.state.value, task.error
    finally:
        await store.close()
    return outcome


# -- printing ---------------------------------------------------------------------------------

COLUMN = 38  # one configuration's figures: requests, KB of system, tools, messages, ~tokens


def kb(n: int) -> str:
    return f"{n / 1000:.1f}"


def figures(runs: list[StageRun] | None) -> str:
    """One configuration's column: its requests, KB per part and estimated tokens."""
    if runs is None:
        return f"{NOT_SUPPORTED:<{COLUMN}}"
    sent = sum((r.sent for r in runs), Parts())
    requests = sum(len(r.requests) for r in runs)
    return (
        f"{requests:>4} {kb(sent.system):>7} {kb(sent.tools):>7} {kb(sent.messages):>7} "
        f"{sent.total // BYTES_PER_TOKEN:>9,}  "
    )


def saved(before: list[StageRun] | None, after: list[StageRun] | None) -> str:
    """How much less `after` sends than `before`, in bytes."""
    if not before or not after:
        return ""
    total_before = sum(r.sent.total for r in before)
    total_after = sum(r.sent.total for r in after)
    return f"{1 - total_after / total_before:>6.0%}" if total_before else ""


def of(outcome: Outcome, label: str | None = None) -> list[StageRun] | None:
    """The runs of one stage (all of them without `label`); None for a refused config."""
    if outcome.refused:
        return None
    return [r for r in outcome.runs if label is None or r.label == label]


_UNITS = f"{'req':>4} {'sys KB':>7} {'tool KB':>7} {'msg KB':>7} {'~tokens':>9}  "
HEAD = (
    f"{'':<18}{'CLI defaults (tools: cli)':<{COLUMN}}{'T25 (tools left out)':<{COLUMN}}saved\n"
    f"{'stage':<18}{_UNITS}{_UNITS}"
)


def report(cli: str, model: str, runs: dict[str, Outcome]) -> None:
    print(f"\n== {cli} ({model})")
    for name, outcome in runs.items():
        if outcome.refused:
            why = outcome.refused.splitlines()[0].split("t25.yaml:", 1)[-1]
            print(f"  {name}: {NOT_SUPPORTED} (line {why[:100]})")
        elif outcome.state != "DONE":
            print(f"  {name}: the task ended {outcome.state}: {outcome.error}")
    defaults, t25 = runs["defaults"], runs["t25"]
    print(HEAD)
    labels = list(dict.fromkeys(r.label for o in (defaults, t25) for r in o.runs))
    for label in [*labels, None]:
        before, after = of(defaults, label), of(t25, label)
        print(f"{label or 'whole task':<18}{figures(before)}{figures(after)}{saved(before, after)}")
    fixed = ", ".join(
        f"{name} {kb(largest)} KB"
        for name, outcome in (("defaults", defaults), ("t25", t25))
        if (largest := _largest_fixed(outcome)) is not None
    )
    print(f"  largest fixed part of one request (system prompt + tool schemas): {fixed}")
    if "resume" in runs:
        fresh, resumed = of(t25, "IMPLEMENTING #2"), of(runs["resume"], "IMPLEMENTING #2")
        print(
            f"{'send-back dev run':<18}{'fresh (resume: false)':<{COLUMN}}{'resume: true':<{COLUMN}}"
        )
        print(f"{'IMPLEMENTING #2':<18}{figures(fresh)}{figures(resumed)}{saved(fresh, resumed)}")


def delivered(cli: str, name: str, outcome: Outcome) -> None:
    """Exit unless the task was delivered as the figures say, or its config was refused."""
    if outcome.refused:
        return
    silent = [r.label for r in outcome.runs if not r.requests]
    labels = [r.label for r in outcome.runs]
    happened(
        outcome.state == "DONE" and not silent and "IMPLEMENTING #2" in labels,
        f"{cli} {name}: the task ended {outcome.state} ({outcome.error}) after runs {labels}; "
        f"runs that asked the model nothing: {silent}",
    )


def _largest_fixed(outcome: Outcome) -> int | None:
    """The largest system prompt plus tool schemas any one request carried."""
    if outcome.refused or not outcome.runs:
        return None
    return max((parts(r).fixed for run in outcome.runs for r in run.requests), default=0)


def environment(fake: FakeModel, homes: Path) -> None:
    """Each CLI's endpoint and login pointed at the fake, as tests/e2e/real_clis sets them."""
    os.environ.update(
        fake.proxy_env(),
        PATH=f"{BIN_DIR}:{AIDER_DIR}:{os.environ['PATH']}",
        T25_RUN_HOMES=str(homes),
        OPENAI_API_BASE=fake.base_url + "/v1",
        OPENAI_API_KEY="dummy-openai",
        ANTHROPIC_BASE_URL=fake.base_url,
        ANTHROPIC_API_KEY="dummy-anthropic",
        FAKE_API_KEY="dummy-openai",
        GEMINI_API_KEY="dummy-gemini",
        GOOGLE_GEMINI_BASE_URL=fake.base_url,
        OPENCODE_CONFIG_CONTENT=json.dumps(
            {
                "autoupdate": False,
                "share": "disabled",
                "provider": {
                    "fake": {
                        "npm": "@ai-sdk/openai-compatible",
                        "name": "fake",
                        "options": {"baseURL": fake.base_url + "/v1", "apiKey": "dummy-openai"},
                        "models": {"fake-model": {"name": "fake-model"}},
                    }
                },
            }
        ),
    )


# `resume` needs the CLI's own HOME (its sessions live there): no private HOME, no sandbox;
# the HOME is this measurement's own (`own_home`).
CONFIGURATIONS = {
    "defaults": {"tools": "cli"},
    "t25": {},
    "resume": {"resume": True, "private_home": False, "sandbox": "none"},
}


def own_home(where: Path) -> None:
    """A HOME of the bench's own for a CLI that keeps its sessions there, with Codex told
    to stay headless (as a private HOME would be)."""
    (where / ".codex").mkdir(parents=True)
    (where / ".codex" / "config.toml").write_text(HEADLESS_CONFIG)
    os.environ["HOME"] = str(where)
    os.environ.pop("CODEX_HOME", None)


async def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument(
        "--clis", default=",".join(CLIS), help="comma-separated, of " + ", ".join(CLIS)
    )
    parser.add_argument("--no-resume", action="store_true", help="skip the resume: true run")
    parser.add_argument(
        "--model", help="the model every CLI's profile names (default: the real-CLI tests')"
    )
    args = parser.parse_args()
    model = {"model": args.model} if args.model else {}
    names = [n for n in CONFIGURATIONS if n != "resume" or not args.no_resume]
    print(
        "One task per CLI through the whole pipeline (every role that CLI, one review "
        "send-back), against the fake model.\nBytes of compact JSON per request part; "
        "~tokens = bytes / 4 (an estimate, no tokenizer)."
    )
    with tempfile.TemporaryDirectory(prefix="t25-bench-tokens-") as tmp:
        for cli in args.clis.split(","):
            runs: dict[str, Outcome] = {}
            for name in names:
                with FakeModel(final=EVERY_STAGE) as fake:
                    environment(fake, Path(tmp) / "homes")
                    home = os.environ.get("HOME", "")
                    if name == "resume":
                        own_home(Path(tmp) / f"{cli}-home")
                    runs[name] = await one_task(
                        cli, fake, CONFIGURATIONS[name] | model, Path(tmp) / f"{cli}-{name}"
                    )
                    delivered(cli, name, runs[name])
                    os.environ["HOME"] = home
            report(cli, args.model or MODELS[cli], runs)
            sys.stdout.flush()


if __name__ == "__main__":
    asyncio.run(main())
