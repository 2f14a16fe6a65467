"""What every command needs: the configuration, the runtime built on it, the actor.

A command that reads or decides gets the control plane as `Operations` (`run`), the one
surface every face calls; a command that works the queue or serves gets the whole
runtime (`run_runtime`, `runtime_of`), with its sweeper when it drives workers. Both are
built by t25_tui.runtime.open_runtime, never here.
"""

from __future__ import annotations

import argparse
import asyncio
import sys
from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import asynccontextmanager
from pathlib import Path
from typing import TYPE_CHECKING, TypeVar

from core.config.keys import Bindable
from core.config.schema import Config, find_config, load_config
from core.errors import ConfigError
from core.workspace.git import identity

if TYPE_CHECKING:  # the runtime is imported when a command opens it: `t25 --help` stays light
    from core.ports import Operations
    from t25_tui.runtime import InProcessWorkers, Runtime

T = TypeVar("T")


def config_of(args: argparse.Namespace, *, any_adapter: bool = False) -> Config:
    """The t25.yaml the command works with, refusing adapters T25 does not ship (unless
    `any_adapter`: `t25 doctor` lists every problem rather than stop at the first)."""
    explicit = Path(args.config) if args.config else None
    return load_config(
        find_config(Path.cwd(), explicit),
        adapters=None if any_adapter else adapter_names(),
        commands=cockpit_commands,
    )


def cockpit_commands() -> dict[str, Bindable]:
    """The cockpit's commands, so a `keys:` entry it could not bind is refused at load
    (asked for only when t25.yaml has `keys:`)."""
    from t25_tui.tui.commands import bindable  # a table: no Textual

    return bindable()


def adapter_names() -> list[str]:
    from adapters.registry import BUILTIN_NAMES  # the names only: no adapter is imported

    return list(BUILTIN_NAMES)


@asynccontextmanager
async def runtime_of(
    args: argparse.Namespace, *, in_process: InProcessWorkers | None = None
) -> AsyncIterator[Runtime]:
    """The runtime of the command's t25.yaml, with `in_process` working in this process if given."""
    from t25_tui.runtime import open_runtime

    async with open_runtime(config_of(args), in_process=in_process) as runtime:
        yield runtime


def run(args: argparse.Namespace, body: Callable[[Operations], Awaitable[T]]) -> T:
    """Open the runtime, run `body` with its control plane, close everything."""
    return run_runtime(args, lambda runtime: body(runtime.operations))


def run_runtime(
    args: argparse.Namespace,
    body: Callable[[Runtime], Awaitable[T]],
    *,
    in_process: InProcessWorkers | None = None,
) -> T:
    """Open the runtime (with `in_process`), run `body` with it, close everything."""

    async def go() -> T:
        async with runtime_of(args, in_process=in_process) as runtime:
            if in_process is not None:
                warn_if_unconfined(runtime.config)
                await guard_the_store(runtime.config)
            return await body(runtime)

    return asyncio.run(go())


async def guard_the_store(config: Config) -> None:
    """A Postgres store that lets anyone in over TCP: say so on every start that runs
    agents; with `sandbox: required`, refuse to run them on the host's network beside it
    (an agent there reaches the store's port)."""
    from store.open_door import accepts_without_password

    warning = await accepts_without_password(config.store_url)
    if warning is None:
        return
    if config.sandbox.mode == "required" and config.sandbox.network == "shared":
        raise ConfigError(
            f"sandbox: required, but {warning}, and network: shared lets agents reach it",
            hint="give the store's role a password, or set sandbox.network: allowlist",
        )
    print(f"t25: warning: {warning}", file=sys.stderr)


def warn_if_unconfined(config: Config) -> None:
    """Agents about to run unconfined: say so, on every start (stderr)."""
    from adapters.sandbox import describe, unconfined_reason

    if unconfined_reason(config.sandbox.mode):
        print(
            f"t25: warning: {describe(config.sandbox.mode, config.sandbox.network)}",
            file=sys.stderr,
        )


def actor_of(args: argparse.Namespace) -> str:
    """Who decides: the OS user, with the git identity when one is configured. `--actor`
    is a claim, recorded beside who ran the command (`alice (claimed ana)`), as serve records
    a request body's claim beside its token's name; the text is checked at the door."""
    from core.domain import text

    who = identity(Path.cwd())
    if args.actor is None:
        return who
    claimed = text.actor(args.actor)  # InvalidInput, naming what is wrong with the claim
    return who if claimed == who else f"{who} (claimed {claimed})"[: text.MAX_ACTOR]
