"""How long each real agent CLI takes through its T25 adapter against the fake model server:
a one-shot run that edits a file (median of N) unconfined and in the default sandbox
(bubblewrap), and how fast an injected quota error and an overload come back with each CLI's
own retries limited. First, what confinement alone adds to starting a process (`true`, median
of 30): the reaper that leads an unconfined run, bubblewrap, and bubblewrap under a run's
caps (the launcher, and the cgroup made and removed where one is had). It exits non-zero
unless every timed process ran: `true` exited 0, each one-shot run succeeded and its edit
landed, and each injected error came back as that error. Run by hand:

    .venv/bin/python bench/agent_clis.py [N]
"""

from __future__ import annotations

import asyncio
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from checked import happened

from adapters.caps import capped
from adapters.process import minimal_env, run_process
from adapters.registry import builtin_adapters
from adapters.sandbox import Bubblewrap, Confinement, Sandbox
from core.domain.agent import AgentRequest, RunCaps
from core.domain.models import TaskState
from tests.support.fakemodel.server import FakeModel
from tests.support.real_clis import AIDER_DIR, BIN_DIR, FINAL, MODELS, profile

API = {
    "claude": "anthropic",
    "codex": "openai",
    "gemini": "gemini",
    "opencode": "openai",
    "aider": "openai",
}
SLOW_QUOTA = {"aider"}  # its own retries run about a minute: not measured


def environment(fake: FakeModel) -> None:
    import json

    os.environ.update(
        fake.proxy_env(),
        PATH=f"{BIN_DIR}:{AIDER_DIR}:{os.environ['PATH']}",
        OPENAI_API_BASE=fake.base_url + "/v1",
        OPENAI_API_KEY="dummy",
        ANTHROPIC_BASE_URL=fake.base_url,
        ANTHROPIC_API_KEY="dummy",
        FAKE_API_KEY="dummy",
        GEMINI_API_KEY="dummy",
        GOOGLE_GEMINI_BASE_URL=fake.base_url,
        OPENCODE_CONFIG_CONTENT=json.dumps(
            {
                "provider": {
                    "fake": {
                        "npm": "@ai-sdk/openai-compatible",
                        "name": "fake",
                        "options": {"baseURL": fake.base_url + "/v1", "apiKey": "dummy"},
                        "models": {"fake-model": {"name": "fake-model"}},
                    }
                }
            }
        ),
    )


async def startup(n: int = 30) -> None:
    """The start-up cost of each wrapper around a process that does nothing."""
    work = Path(tempfile.mkdtemp(prefix="t25-bench-"))
    subprocess.run(["git", "init", "-q"], cwd=work, check=True)
    box = Confinement(worktree=work, home=None)
    env = minimal_env()
    wrappers = {
        "bare": lambda argv: argv,
        "reaper (unconfined)": lambda argv: Sandbox().wrap(argv, box, env),
        "bubblewrap": lambda argv: Bubblewrap().wrap(argv, box, env),
    }
    caps = RunCaps(memory_mib=4096, processes=512, cpu_s=3600)
    medians = {}
    for name, wrap in [*wrappers.items(), ("bubblewrap, capped", wrappers["bubblewrap"])]:
        times = []
        for _ in range(n):
            started = time.monotonic()
            async with capped(wrap(["/bin/true"]), caps if "capped" in name else None, "b") as run:
                done = await run_process(
                    run.argv, cwd=work, env=env, timeout_s=30, abort=asyncio.Event()
                )
            happened(done.exit_code == 0, f"{name}: true exited {done.exit_code}: {done.log!r}")
            times.append(time.monotonic() - started)
        medians[name] = statistics.median(times) * 1000
    bare = medians["bare"]
    for name, ms in medians.items():
        extra = "" if name == "bare" else f"  (+{ms - bare:.1f} ms)"
        print(f"start-up  {name:<20} {ms:7.1f} ms{extra}")
    print()


async def once(
    cli: str, fake: FakeModel, sandbox: str = "none", expect: str = "ok"
) -> tuple[float, str]:
    """Seconds one dev run of `cli` took, and how it ended: `expect`, or the bench exits."""
    work = Path(tempfile.mkdtemp(prefix="t25-bench-"))
    subprocess.run(["git", "init", "-q"], cwd=work, check=True)
    entry = profile(cli, fake)
    request = AgentRequest(
        task_id="T-1",
        run_id="R-1",
        role="dev",
        stage=TaskState.IMPLEMENTING,
        prompt="add a greeting",
        cwd=work,
        model=MODELS[cli],
        args=tuple(entry.get("args", ())),
        env_passthrough=tuple(entry.get("env_passthrough", ())),
        private_home=True,
        timeout_s=600,
        sandbox=sandbox,
    )

    async def sink(stream: str, text: str) -> None:
        pass

    started = time.monotonic()
    result = await builtin_adapters()[cli].run(request, sink, asyncio.Event())
    took = time.monotonic() - started
    ended = result.failure or "ok"
    wrote = (work / fake.file).exists()
    happened(
        ended == expect and (wrote or expect != "ok"),
        f"{cli} ({sandbox}) ended {ended!r}, not {expect!r}; its edit landed: {wrote}; "
        f"{result.error or ''}",
    )
    return took, ended


async def main(n: int) -> None:
    await startup()
    print(
        f"{'cli':<9} {'ok run (median)':>16} {'sandboxed':>12} {'quota error':>14} {'overload':>14}"
    )
    for cli in ("claude", "codex", "gemini", "opencode", "aider"):
        if not ((BIN_DIR / cli).exists() or (AIDER_DIR / cli).exists()):
            print(f"{cli:<9} not installed")
            continue
        with FakeModel(final=FINAL) as fake:
            environment(fake)
            times = [(await once(cli, fake))[0] for _ in range(n)]
            boxed = [(await once(cli, fake, "bwrap"))[0] for _ in range(n)]
            quota, quota_failure = float("nan"), "-"
            if cli not in SLOW_QUOTA:
                fake.fail_next("quota", times=100, api=API[cli])
                quota, quota_failure = await once(cli, fake, expect="quota")
        overload = "(minutes: no limit)" if cli in ("gemini", "opencode", "aider") else None
        if overload is None:
            with FakeModel(final=FINAL) as fake:
                environment(fake)
                fake.fail_next("overload", times=100, api=API[cli])
                seconds, failure = await once(cli, fake, expect="overload")
                overload = f"{seconds:.2f} s {failure}"
        print(
            f"{cli:<9} {statistics.median(times):>14.2f} s {statistics.median(boxed):>10.2f} s"
            f" {quota:>9.2f} s {quota_failure:<5}"
            f" {overload:>14}"
        )


if __name__ == "__main__":
    asyncio.run(main(int(sys.argv[1]) if len(sys.argv) > 1 else 3))
