"""`t25 serve` against a hostile client: how long a hostile body takes to answer, what it
costs serve in memory, and how long `/health` waits meanwhile.

Each attack gets a fresh `t25 serve` (so its peak resident memory, VmHWM, is that attack's):

  * 63 MB of JSON to `/worker/complete` without the worker credential;
  * 63 MB of JSON to `/tasks` (an operator endpoint, with the checkout's local token);
  * 12 MB of JSON with 10^6 keys to `/tasks`;
  * the same 10^6 keys to `/worker/complete` with the credential (under that endpoint's cap).

Run: .venv/bin/python bench/serve_hostile.py
Figures, not a test; but it exits non-zero unless each attack met the refusal it is there to
time (401 without the credential, 413 over a cap, 422 for keys no body has), `/health`
answered meanwhile, and serve outlived it. Uses the embedded SQLite store.
"""

from __future__ import annotations

import asyncio
import json
import sys
import tempfile
import time
from pathlib import Path

import httpx
from checked import happened

from t25_tui.api.protocol import HEADER as PROTOCOL_HEADER
from t25_tui.api.protocol import PROTOCOL

sys.path.insert(0, str(Path(__file__).resolve().parent))
from serve import CREDENTIAL, operator, repo, start_serve

WORKER = {"Authorization": f"Bearer {CREDENTIAL}", PROTOCOL_HEADER: str(PROTOCOL)}
OPERATOR = {"operator": "yes"}  # stands for the local token, read once the checkout exists


def big_body() -> bytes:
    return json.dumps({"title": "x", "description": "y" * (63 * 10**6)}).encode()


def many_keys() -> bytes:
    return json.dumps({f"k{n:07d}": 1 for n in range(10**6)}).encode()


# (attack, route, body, headers, the answers that show serve refused it as it should: a
# connection serve closed before the whole body was sent counts for a refusal before it)
ATTACKS = [
    ("63 MB, /worker/complete, no credential", "/worker/complete", big_body, {}, "401 closed"),
    ("63 MB, /tasks", "/tasks", big_body, OPERATOR, "413 closed"),
    ("10^6 keys (12 MB), /tasks", "/tasks", many_keys, OPERATOR, "413 closed"),
    (
        "10^6 keys (12 MB), /worker/complete, credential",
        "/worker/complete",
        many_keys,
        WORKER,
        "422",
    ),
]


def peak_rss_mb(pid: int) -> float:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmHWM:"):
            return int(line.split()[1]) / 1024
    return float("nan")


async def attack(url: str, path: str, body: bytes, headers: dict) -> tuple[str, float, float]:
    """The answer's status, seconds to it, and the longest `/health` wait meanwhile."""
    done = asyncio.Event()
    longest = 0.0
    healthy = 0

    async def probe() -> None:
        nonlocal longest, healthy
        async with httpx.AsyncClient(base_url=url, timeout=120) as client:
            while not done.is_set():
                started = time.perf_counter()
                healthy += (await client.get("/health")).status_code == 200
                longest = max(longest, time.perf_counter() - started)
                await asyncio.sleep(0.05)

    probing = asyncio.create_task(probe())
    async with httpx.AsyncClient(base_url=url, timeout=300) as client:
        started = time.perf_counter()
        try:
            response = await client.post(
                path, content=body, headers={**headers, "content-type": "application/json"}
            )
            status = str(response.status_code)
        except httpx.HTTPError as exc:  # serve answered and closed before the body was sent
            status = type(exc).__name__
        elapsed = time.perf_counter() - started
    done.set()
    await probing
    happened(healthy > 0, f"{path}: /health never answered while the attack ran")
    return status, elapsed, longest


def main() -> None:
    print(f"{'attack':<50} {'status':>8} {'answer s':>9} {'/health max s':>14} {'peak RSS MB':>12}")
    with tempfile.TemporaryDirectory() as tmp:
        path = repo(Path(tmp))
        for name, route, make, headers, refusals in ATTACKS:
            body = make()
            proc, url = start_serve(path)
            if headers is OPERATOR:
                headers = operator(path)
            try:
                status, elapsed, longest = asyncio.run(attack(url, route, body, headers))
                rss = peak_rss_mb(proc.pid)
                happened(
                    status in refusals.split()
                    or (status.endswith("Error") and "closed" in refusals),
                    f"{name}: answered {status}, not {refusals}",
                )
                happened(proc.poll() is None, f"{name}: serve exited {proc.poll()}")
            finally:
                proc.terminate()
                proc.wait(timeout=30)
            print(
                f"{name:<50} {status:>8} {elapsed:>9.2f} {longest:>14.2f} {rss:>12.0f}", flush=True
            )


if __name__ == "__main__":
    main()
