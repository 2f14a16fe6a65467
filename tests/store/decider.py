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
from core.control.service import ControlPlane
from core.errors import PolicyRefused, T25Error
from store import open_store


async def decide(config_path: str, actor: str, tasks: list[str]) -> list[dict]:
    config = load_config(Path(config_path))
    store = await open_store(config.store_url)
    control = ControlPlane(config, store)
    outcomes = []
    try:
        print("ready", flush=True)
        await asyncio.to_thread(sys.stdin.readline)
        for ref in tasks:
            for verb in ("cancel", "archive"):
                outcome = {"task": ref, "verb": verb, "actor": actor}
                try:
                    await getattr(control, verb)(ref, actor=actor, reason=f"{verb} by {actor}")
                    outcome["outcome"] = "applied"
                except PolicyRefused as exc:
                    outcome.update(outcome="refused", why=exc.message)
                except T25Error as exc:
                    outcome.update(outcome="failed", why=f"{type(exc).__name__}: {exc.message}")
                outcomes.append(outcome)
    finally:
        await store.close()
    return outcomes


if __name__ == "__main__":
    print(json.dumps(asyncio.run(decide(sys.argv[1], sys.argv[2], sys.argv[3:]))))
