"""A decider killed (SIGKILL) between writing its decision's audit line and applying it:
the state a process killed at that moment leaves (see test_audit_killed_decider.py).

Opens the control plane of the t25.yaml it is given and decides VERB on TASK; the store
transaction that would apply the decision kills the process instead."""

from __future__ import annotations

import asyncio
import os
import signal
import sys
from pathlib import Path

from core.config.schema import load_config
from core.domain.decisions import Decision
from core.domain.verbs import Verb
from t25_tui.runtime import open_runtime


async def decide(config_path: str, verb: str, task: str) -> None:
    async with open_runtime(load_config(Path(config_path))) as runtime:

        async def killed(*_: object, **__: object) -> None:
            os.kill(os.getpid(), signal.SIGKILL)

        runtime.store.apply_decision = killed  # type: ignore[method-assign]
        decision = Decision(verb=Verb(verb), task=task, actor="ana", text="killed while deciding")
        await runtime.operations.decide(decision)


if __name__ == "__main__":
    asyncio.run(decide(*sys.argv[1:4]))
    sys.exit("the decider was not killed")
