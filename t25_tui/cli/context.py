"""What every command needs: the configuration, an open store, the control plane, the actor."""

from __future__ import annotations

import argparse
import asyncio
from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import asynccontextmanager
from datetime import UTC, datetime
from pathlib import Path
from typing import TypeVar

from core.config.schema import Config, find_config, load_config
from core.control.service import ControlPlane
from core.workspace.git import identity

T = TypeVar("T")


def config_of(args: argparse.Namespace, *, any_adapter: bool = False) -> Config:
    """The t25.yaml the command works with, refusing adapters T25 does not ship (unless
    `any_adapter`: `t25 doctor` lists every problem rather than stop at the first)."""
    explicit = Path(args.config) if args.config else None
    return load_config(
        find_config(Path.cwd(), explicit), adapters=None if any_adapter else adapter_names()
    )


def adapter_names() -> list[str]:
    from adapters.registry import BUILTIN_NAMES  # the names only: no adapter is imported

    return list(BUILTIN_NAMES)


@asynccontextmanager
async def open_control_plane(args: argparse.Namespace) -> AsyncIterator[ControlPlane]:
    from store import open_store

    config = config_of(args)
    store = await open_store(config.store_url)
    try:
        control = ControlPlane(config, store)
        await control.sync_projects()
        yield control
    finally:
        await store.close()


def run(args: argparse.Namespace, body: Callable[[ControlPlane], Awaitable[T]]) -> T:
    """Open the control plane, run `body` with it, close everything."""

    async def go() -> T:
        async with open_control_plane(args) as control:
            return await body(control)

    return asyncio.run(go())


def actor_of(args: argparse.Namespace) -> str:
    return args.actor or identity(Path.cwd())


def age(since: datetime, now: datetime | None = None) -> str:
    seconds = int(((now or datetime.now(UTC)) - since).total_seconds())
    for unit, size in (("d", 86400), ("h", 3600), ("m", 60)):
        if seconds >= size:
            return f"{seconds // size}{unit}"
    return f"{max(seconds, 0)}s"
