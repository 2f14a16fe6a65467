"""The version of the worker protocol: what a remote worker and `t25 serve` must agree on.

The worker protocol is every request a worker sends to serve (`/worker/…`) and every
answer to one, with the models they carry: a claim's Lease, Run, Task, Author and
ResumableSession, a RunReport, the events. The models refuse fields they do not know, so
a worker and a serve that disagree on any of them cannot read each other; before versions
were said, such a worker claimed a run it could not read, and its attempt was spent. Now each says
which version it speaks: a worker in the `T25-Protocol` header of every request, serve in
`/health`. Serve refuses a worker request of another version (426, `protocol_mismatch`)
before anything is leased; a worker reads serve's version before its first claim and
ends on a mismatch (`ProtocolMismatch`), saying which side to upgrade.

PROTOCOL goes up by one with any change to a worker-facing request or response body,
including a field added to, removed from or changed in a model a claim, an event or a
completion carries (Task, Run, Lease, RunReport, …). Version 1 is every T25 that sent no
version: a request without the header, and a `/health` without `protocol`, are version 1.
"""

from __future__ import annotations

from importlib.metadata import PackageNotFoundError, version

# 2: the first one said (with Task's `priority`); 3: events carry their `seq`; 4: a run's
# report carries what PR_OPEN heard of its pull request (`RunReport.pull_request`)
PROTOCOL = 4
UNVERSIONED = 1  # what a T25 that says no version speaks
HEADER = "T25-Protocol"


def t25_version() -> str:
    """This T25's version, as `t25 --version` gives it."""
    try:
        return version("t25")
    except PackageNotFoundError:  # a bare checkout on sys.path, never installed
        return "(not installed)"


def spoken(said: str | None) -> int:
    """The protocol a worker's header, or serve's `/health` field, says (`None`: version 1);
    0 for what is no version at all."""
    if said is None:
        return UNVERSIONED
    text = said.strip()
    return int(text) if text.isdigit() and len(text) < 6 else 0


def refused_worker(worker: int) -> str | None:
    """Why this serve cannot serve a worker of protocol `worker`; None when it can."""
    if worker == PROTOCOL:
        return None
    upgrade = (
        f"upgrade the worker to T25 {t25_version()}"
        if worker < PROTOCOL
        else f"upgrade this serve (T25 {t25_version()}) to the worker's T25"
    )
    return f"this serve speaks protocol {PROTOCOL}, the worker {worker}: {upgrade}"


def refused_serve(serve: int, serve_version: str | None) -> str | None:
    """Why this worker cannot work for a serve of protocol `serve` (of T25 `serve_version`,
    when it said); None when it can."""
    if serve == PROTOCOL:
        return None
    upgrade = (
        f"upgrade serve to T25 {t25_version()}"
        if serve < PROTOCOL
        else f"upgrade this worker to T25 {serve_version or 'as new as serve'}"
    )
    return f"serve speaks protocol {serve}, this worker {PROTOCOL}: {upgrade}"
