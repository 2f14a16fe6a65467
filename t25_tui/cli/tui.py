"""`t25 tui`: the cockpit, with the store, the bus and the in-process workers embedded,
or (`--url`) attached to a remote `t25 serve`.

Textual is imported only here, when the command runs, so `t25 --help` stays fast.
"""

from __future__ import annotations

import argparse
import asyncio
import sys
from pathlib import Path

from core.config.schema import find_config
from core.errors import ConfigError
from t25_tui.cli.context import actor_of, guard_the_store, runtime_of, warn_if_unconfined


def tui(args: argparse.Namespace) -> int:
    if args.url:
        if (
            args.web is not None
            or args.serve is not None
            or args.workers is not None
            or args.no_workers
        ):
            raise ConfigError(
                "--url attaches to a control plane that has its own workers and "
                "serve; --web, --serve, --workers and --no-workers do not apply"
            )
        return asyncio.run(attached(args))
    if not args.config and not _offer_config(args):
        return 1
    if args.web is not None:
        if args.serve is not None:
            raise ConfigError(
                "--web serves its own control plane on loopback; --serve does not apply"
            )
        return asyncio.run(web(args))
    return asyncio.run(cockpit(args, workers=args.workers, no_workers=args.no_workers))


async def attached(args: argparse.Namespace) -> int:
    """The cockpit on a remote `t25 serve`: every read and decision over REST, events over SSE."""
    from t25_tui.api.cockpit_client import attach
    from t25_tui.api.credentials import operator_token
    from t25_tui.tui.app import calm_garbage_collector, make_app

    try:  # this checkout's serve leaves its token for the operators of its host
        root: Path | None = find_config(Path.cwd(), args.config).parent
    except ConfigError:
        root = None
    token = operator_token(root, Path(args.token_file) if args.token_file else None)
    async with attach(args.url, token) as remote:
        # serve records its token's name; what this side says stands beside it, as a claim
        claim = args.actor or actor_of(args)
        app = make_app(remote, actor=claim, link=remote.link, handle_signals=True)
        calm_garbage_collector()
        await app.run_async()
    return 0


def _offer_config(args: argparse.Namespace) -> bool:
    """No t25.yaml here: offer to create one (as `t25 init` does)."""
    try:
        find_config(Path.cwd(), None)
        return True
    except ConfigError as exc:
        print(f"t25: {exc.message}", file=sys.stderr)
    if not sys.stdin.isatty():
        print("  hint: run `t25 init` in your repository to create one", file=sys.stderr)
        return False
    reply = input("Create t25.yaml and .factory/ here now (as `t25 init` does)? [Y/n] ")
    if reply.strip().lower() not in ("", "y", "yes"):
        print("nothing created; `t25 init` creates it when you are ready")
        return False
    from t25_tui.cli.setup import init

    init(args)
    return True


async def cockpit(
    args: argparse.Namespace, *, workers: int | None = None, no_workers: bool = False
) -> int:
    from adapters.registry import builtin_adapters
    from t25_tui.runtime import InProcessWorkers
    from t25_tui.tui.app import calm_garbage_collector, make_app
    from t25_tui.tui.readiness import missing_agents

    async with runtime_of(
        args, in_process=None if no_workers else InProcessWorkers(workers=workers)
    ) as runtime:
        if not no_workers:
            warn_if_unconfined(runtime.config)
            await guard_the_store(runtime.config)
        adapters = builtin_adapters()
        app = make_app(
            runtime.operations,
            sweeper=runtime.sweeper,
            actor=actor_of(args),
            adapters=adapters,
            setup_note=missing_agents(runtime.config, adapters),
            handle_signals=True,
        )
        server = serving = None
        if getattr(args, "serve", None) is not None:
            from t25_tui.api.server import http_server

            bind = args.serve or runtime.config.serve.bind
            server = http_server(runtime.control, bind, handle_signals=False)
            serving = asyncio.create_task(server.serve())
        calm_garbage_collector()
        try:
            await app.run_async()
        finally:
            if server is not None and serving is not None:
                server.should_exit = True
                await asyncio.gather(serving, return_exceptions=True)
            # However the app ended (quit, hang-up, a lost terminal), the agents stop and
            # their runs return to the queue before the store closes.
            await app.stop_sweeper()
    return 0


async def web(args: argparse.Namespace) -> int:
    """The cockpit in a browser: the control plane and its workers here, on loopback, and a
    web page whose every session is a cockpit attached to them with its operator's token
    (t25_tui.api.web). Serves until interrupted."""
    import signal
    import socket

    from t25_tui.api.server import configured_operators, http_server, parse_bind
    from t25_tui.api.web import WebCockpit, accepted_operators, check_bind
    from t25_tui.runtime import InProcessWorkers

    host, port = parse_bind(args.web)
    configured = configured_operators()
    check_bind(host, args.web, configured)
    in_process = None if args.no_workers else InProcessWorkers(workers=args.workers)
    async with runtime_of(args, in_process=in_process) as runtime:
        control, sweeper = runtime.control, runtime.sweeper
        if sweeper is not None:
            warn_if_unconfined(control.config)
            await guard_the_store(control.config)
        inner = socket.socket()  # the sessions' control plane: loopback, a free port
        inner.bind(("127.0.0.1", 0))
        inner_bind = f"127.0.0.1:{inner.getsockname()[1]}"
        control_url = f"http://{inner_bind}"
        server = http_server(control, inner_bind, handle_signals=False, bound=True)
        page = WebCockpit(
            host,
            port,
            control_url=control_url,
            operators=accepted_operators(control.config.root, configured),
        )
        stop = asyncio.Event()
        loop = asyncio.get_running_loop()
        for signum in (signal.SIGINT, signal.SIGTERM, signal.SIGHUP):
            loop.add_signal_handler(signum, stop.set)
        tasks = [asyncio.create_task(server.serve(sockets=[inner]))]
        if sweeper is not None:
            tasks.append(asyncio.create_task(sweeper.work(follow=True)))
        print(
            f"t25 tui --web: the cockpit on http://{args.web}/ (sign in with your operator "
            "token; on this host the one in .factory/operator-token); ctrl+c stops it",
            flush=True,
        )
        try:
            await page.run(stop)
        finally:
            server.should_exit = True
            for task in tasks[1:]:
                task.cancel()
            await asyncio.gather(*tasks, return_exceptions=True)
    return 0
