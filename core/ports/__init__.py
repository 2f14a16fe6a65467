"""The ports of T25's core: what each plane needs of the others and of the outside world.

    Store         what T25 keeps (tasks, runs, events, leases, artifacts, the audit anchor);
                  implemented by the `store` package (SQLite, Postgres). Its roles, for a
                  part that needs one: TaskStore, EventLog, RunLeases, ArtifactStore,
                  AuditAnchorStore, and AuditChainStore for a store that keeps the audit
                  chain itself (Postgres)
    AgentAdapter  one agent CLI run headless; implemented by the `adapters` package
    CheckRunner   one QA check run in a tree, confined; implemented by `adapters.checks`
    RunQueue      what a worker asks of the control plane (claim, heartbeat, prompt, output,
                  completion); in-process by core.control, over HTTP by t25_tui.api
    Operations    what every face asks of the control plane (reads, new tasks, decisions);
                  in-process by core.control, over REST by t25_tui.api
    TaskBook      what the pipeline asks of the control plane (a task's runs, events and
                  artifacts; a run's completion and the moves of the decision on it);
                  implemented by core.control's ControlPlane

The core depends on these protocols only; the packages around it implement them.
"""

from core.ports.agents import AgentAdapter, CheckRunner, OutputSink
from core.ports.operations import Operations
from core.ports.runs import Claim, RunQueue
from core.ports.store import (
    STORE_PATIENCE_S,
    ArtifactStore,
    AuditAnchorStore,
    AuditChainStore,
    DecisionWrite,
    EventLog,
    NewArtifact,
    RunLeases,
    Store,
    TaskMove,
    TaskStore,
)

__all__ = [
    "STORE_PATIENCE_S",
    "AgentAdapter",
    "ArtifactStore",
    "AuditAnchorStore",
    "AuditChainStore",
    "CheckRunner",
    "Claim",
    "DecisionWrite",
    "EventLog",
    "NewArtifact",
    "Operations",
    "OutputSink",
    "RunLeases",
    "RunQueue",
    "Store",
    "TaskMove",
    "TaskStore",
]
