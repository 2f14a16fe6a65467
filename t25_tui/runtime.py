"""Putting T25 together: the in-process workers and the sweeper that drives them.

A control plane (core.control.service.ControlPlane) works its own queue through a
`WorkerPool` of this process, leasing from it by the in-process run queue, with the
adapters T25 ships and its QA check runner unless told otherwise. `t25 run`, `t25 serve`,
the cockpit, the tests and the benchmarks all build it here.
"""

from __future__ import annotations

from collections.abc import Mapping

from core.control.run_queue import LocalRunQueue
from core.control.service import ControlPlane
from core.control.sweeper import STORE_PATIENCE_S, Sweeper
from core.ports import AgentAdapter
from core.worker.pool import WorkerPool
from core.worker.worker import CheckRunner


def local_workers(
    control: ControlPlane,
    adapters: Mapping[str, AgentAdapter] | None = None,
    run_check: CheckRunner | None = None,
    *,
    count: int | None = None,
    lease_ttl_s: float = 30.0,
    heartbeat_s: float = 2.0,
) -> WorkerPool:
    """`count` workers in this process (default: `limits.workers`), leasing from `control`."""
    if adapters is None:
        from adapters.registry import builtin_adapters

        adapters = builtin_adapters()
    if run_check is None:
        from adapters.checks import run_check
    return WorkerPool(
        LocalRunQueue(control),
        control.workspace,
        adapters,
        run_check,
        count=control.config.limits.workers if count is None else count,
        lease_ttl_s=lease_ttl_s,
        heartbeat_s=heartbeat_s,
        live=control.live,
        wake=control.work_queued,
    )


def local_sweeper(
    control: ControlPlane,
    adapters: Mapping[str, AgentAdapter] | None = None,
    run_check: CheckRunner | None = None,
    *,
    workers: int | None = None,
    lease_ttl_s: float = 30.0,
    heartbeat_s: float = 2.0,
    sweep_s: float = 0.5,
    store_patience_s: float = STORE_PATIENCE_S,
) -> Sweeper:
    """The sweeper of `control`, driving `workers` in-process workers (0: none)."""
    pool = local_workers(
        control,
        adapters,
        run_check,
        count=workers,
        lease_ttl_s=lease_ttl_s,
        heartbeat_s=heartbeat_s,
    )
    return Sweeper(control, pool, sweep_s=sweep_s, store_patience_s=store_patience_s)
