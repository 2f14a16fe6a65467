"""Health, the audit trail, cost and the configuration."""

from __future__ import annotations

from typing import Any

from fastapi import APIRouter

from core.domain.cost import CostSummary
from t25_tui.api import document
from t25_tui.api.services import Control, Ops

router = APIRouter()


@router.get("/health", responses=document.answers())
async def health(control: Control) -> dict[str, Any]:
    return {
        "ok": True,
        "store": control.store.url.split(":", 1)[0],
        "last_event_id": await control.last_event_id(),
    }


@router.get("/audit", responses=document.READ)
async def audit(control: Ops, task: str | None = None) -> dict[str, Any]:
    """The audit log's entries (one task's, with `task`) and the whole chain's verification."""
    trail = await control.audit_trail(task=task)
    return {
        "entries": [e.model_dump(mode="json") for e in trail.entries],
        "verified": trail.verdict.ok,
        "verification": trail.verdict.message,
        "lines": trail.verdict.lines,
        "bad_line": trail.verdict.bad_line,
    }


@router.get("/config", responses=document.READ)
async def configuration(control: Ops) -> dict[str, Any]:
    """t25.yaml as validated: projects, roles, limits, policies, cost rates. The store's
    address is left out: in production it names the database."""
    return control.config.model_dump(mode="json", exclude={"store"})


@router.get("/cost/tasks", responses=document.READ)
async def cost_by_task(control: Ops) -> dict[str, float]:
    """Each task's summed run cost, by task id (the board's figure)."""
    return await control.cost_by_task()


@router.get("/cost", response_model=CostSummary, responses=document.READ)
async def cost(control: Ops) -> CostSummary:
    return await control.cost()
