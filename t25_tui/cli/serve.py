"""`t25 serve` (the control plane over REST and SSE) and `t25 worker --url` (a remote worker)."""

from __future__ import annotations

import argparse
import asyncio
import sys
from typing import TYPE_CHECKING

from core.config import held_secrets
from core.errors import ConfigError, T25Error
from t25_tui.cli.context import config_of, guard_the_store, runtime_of, warn_if_unconfined

if TYPE_CHECKING:
    from core.control.service import ControlPlane

CREDENTIAL_ENV = held_secrets.WORKER_CREDENTIAL


def serve(args: argparse.Namespace) -> int:
    """Serve until stopped (exit 0), or until the sweep cannot go on (exit 1, one line why).

    The sweep rides out a store that is unavailable for a while (core.control.sweeper says how, and
    when it gives up); requests meanwhile get 503 with Retry-After. When the sweep ends
    with an error, serve stops and the error is raised here, after the server has shut
    down, for the command line to print."""
    from t25_tui.api.server import http_server
    from t25_tui.runtime import InProcessWorkers

    if args.store_patience <= 0:
        raise ConfigError("--store-patience must be a positive number of seconds")
    failed: list[BaseException] = []
    in_process = InProcessWorkers(workers=args.workers, store_patience_s=args.store_patience)

    async def body() -> None:
        async with runtime_of(args, in_process=in_process) as runtime:
            control, sweeper = runtime.control, runtime.sweeper
            assert sweeper is not None  # the runtime was opened with in-process workers
            bind = args.bind or control.config.serve.bind
            server = http_server(control, bind)
            print(
                f"t25 serve: control plane on http://{bind} (OpenAPI at /docs); "
                f"{args.workers} in-process worker(s)",
                flush=True,
            )
            if args.workers:
                warn_if_unconfined(control.config)
            await guard_the_store(control.config)
            if not held_secrets.get(CREDENTIAL_ENV):
                print(
                    f"  note: {CREDENTIAL_ENV} is not set, so no remote worker can attach",
                    file=sys.stderr,
                    flush=True,
                )
            sweeping = asyncio.create_task(sweeper.work(follow=True))
            background = [t for t in (sweeping, _intake(control)) if t is not None]

            def stopped(task: asyncio.Task[None]) -> None:  # the sweep must never die quietly
                error = None if task.cancelled() else task.exception()
                if error is not None:
                    failed.append(error)
                    server.should_exit = True

            sweeping.add_done_callback(stopped)
            try:
                await server.serve()
            finally:
                for running in background:
                    running.cancel()
                await asyncio.gather(*background, return_exceptions=True)

    asyncio.run(body())
    if failed:
        if not isinstance(failed[0], T25Error):  # a defect: say where it struck
            print("t25 serve: the pipeline sweep failed", file=sys.stderr, flush=True)
        raise failed[0]
    return 0


def _intake(control: ControlPlane) -> asyncio.Task[None] | None:
    """The projects' intake (`projects[].intake`), taken in for as long as serve runs."""
    from core.control.intake import keep_taking_in
    from t25_tui.runtime import open_intake_forge

    intakes = [(p.name, p.intake) for p in control.config.projects if p.intake is not None]
    if not intakes:
        return None
    print(
        f"  intake: {', '.join(f'{i.repo} every {i.every_s} s' for _, i in intakes)}",
        flush=True,
    )
    return asyncio.create_task(keep_taking_in(control, open_intake_forge, intakes))


def worker(args: argparse.Namespace) -> int:
    """Work runs leased from `args.url` (a list: serve, or its replicas to fail over
    between) until stopped (exit 0), or until serve refuses the credential (exit 1, one
    line why). What the workers do is logged to stderr."""
    from t25_tui.runtime import work_remotely

    credential = held_secrets.get(CREDENTIAL_ENV)
    if not credential:
        raise ConfigError(
            f"{CREDENTIAL_ENV} is not set",
            hint="export the credential the control plane was started with",
        )
    config = config_of(args)
    _log_to_stderr()
    print(f"t25 worker: {args.workers} worker(s) leasing from {_listed(args.url)}", flush=True)
    warn_if_unconfined(config)
    if not 0 < args.heartbeat < args.lease_ttl:
        raise ConfigError("--heartbeat must be positive and shorter than --lease-ttl")
    asyncio.run(
        work_remotely(
            args.url,
            credential,
            config,
            workers=args.workers,
            lease_ttl_s=args.lease_ttl,
            heartbeat_s=args.heartbeat,
        )
    )
    return 0


def _listed(urls: list[str]) -> str:
    """`A`, or `A (failing over to B, C)`."""
    rest = f" (failing over to {', '.join(urls[1:])})" if len(urls) > 1 else ""
    return f"{urls[0]}{rest}"


def _log_to_stderr() -> None:
    """T25's own loggers (`t25.worker`: claims, finishes, releases, lost leases; `t25.remote`:
    serve unreachable, retries) at INFO on stderr; libraries' loggers stay quiet."""
    import logging

    handler = logging.StreamHandler(sys.stderr)
    handler.setFormatter(logging.Formatter("%(asctime)s %(name)s: %(message)s"))
    t25 = logging.getLogger("t25")
    t25.addHandler(handler)
    t25.setLevel(logging.INFO)
    t25.propagate = False
