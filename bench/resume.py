"""What a review send-back costs with `resume: true` against a dev run that starts cold, per
real agent CLI against the fake model server (which logs every request): requests and bytes
sent to the model by the dev run the review sent back, and by the whole task's dev runs.

The fake model answers a conversation that already holds a tool result at once, so a resumed
run asks it once where a cold one asks twice (a tool call, then the answer): the byte figures
say what each request carries, not how much work a real model would redo. It exits non-zero
unless each task ended DONE after two dev runs that both asked the model, the second resumed
when `resume: true` and cold otherwise. Run by hand:

    .venv/bin/python bench/resume.py [CLI ...]      (default: claude codex opencode)
"""

from __future__ import annotations

import asyncio
import os
import sys
import tempfile
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from checked import happened

from adapters.codex import HEADLESS_CONFIG
from bench.agent_clis import environment
from tests.support.fakemodel.server import FakeModel
from tests.support.real_clis import FINAL, SendBack, send_back_loop
from tests.support.repos import make_shop


async def measure(cli: str, *, resume: bool) -> SendBack:
    where = Path(tempfile.mkdtemp(prefix="t25-bench-resume-"))
    (where / "home" / ".codex").mkdir(parents=True)
    (where / "home" / ".codex" / "config.toml").write_text(HEADLESS_CONFIG)
    os.environ["HOME"] = str(where / "home")  # the CLI's sessions: this measurement's
    os.environ.pop("CODEX_HOME", None)
    with FakeModel(final=FINAL) as fake:
        environment(fake)
        loop = await send_back_loop(cli, fake, make_shop(where), resume=resume)
    if loop.task.state.value != "DONE":
        raise SystemExit(f"{cli}: the task ended {loop.task.state}: {loop.task.error}")
    resumed = [run.resumed_session is not None for run in loop.dev]
    happened(
        resumed == [False, resume] and bool(loop.first) and bool(loop.second),
        f"{cli} (resume: {resume}): dev runs resumed {resumed}, "
        f"{len(loop.first)} and {len(loop.second)} model requests",
    )
    return loop


async def main(clis: list[str]) -> None:
    print(f"{'cli':<9} {'send-back dev run':<18} {'requests':>8} {'bytes':>9}   whole task's dev")
    for cli in clis:
        for resume in (False, True):
            loop = await measure(cli, resume=resume)
            how = f"resumed ({loop.dev[1].resumed_session is not None})" if resume else "cold"
            both = loop.first + loop.second
            print(
                f"{cli:<9} {how:<18} {len(loop.second):>8} {SendBack.size(loop.second):>9,}"
                f"   {len(both)} requests, {SendBack.size(both):,} bytes"
            )


if __name__ == "__main__":
    asyncio.run(main(sys.argv[1:] or ["claude", "codex", "opencode"]))
