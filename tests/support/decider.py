"""One of several processes deciding at once (see test_decisions_across_processes.py).

Opens the control plane of the t25.yaml it is given, says `ready`, waits for `go` on stdin, then
cancels and archives each task it was given in turn, and prints what became of every
decision as one JSON line: applied, refused (PolicyRefused), or failed (any other error).
"""

from __future__ import annotations

import asyncio
import json
import sys
from pathlib import Path

from core.config.schema import load_config
from core.domain.decisions import Decision
from core.domain.verbs import Verb
from core.errors import PolicyRefused, T25Error
from t25_tui.runtime import open_runtime


async def decide(config_path: str, actor: str, tasks: list[str]) -> list[dict]:
    outcomes = []
    async with open_runtime(load_config(Path(config_path))) as runtime:
        print("ready", flush=True)
        await asyncio.to_thread(sys.stdin.readline)
        for ref in tasks:
            for verb in (Verb.CANCEL, Verb.ARCHIVE):
                outcome = {"task": ref, "verb": verb.value, "actor": actor}
                decision = Decision(verb=verb, task=ref, actor=actor, text=f"{verb} by {actor}")
                try:
                    await runtime.operations.decide(decision)
                    outcome["outcome"] = "applied"
                except PolicyRefused as exc:
                    outcome.update(outcome="refused", why=exc.message)
                except T25Error as exc:
                    outcome.update(outcome="failed", why=f"{type(exc).__name__}: {exc.message}")
                outcomes.append(outcome)
    return outcomes


if __name__ == "__main__":
    print(json.dumps(asyncio.run(decide(sys.argv[1], sys.argv[2], sys.argv[3:]))))
