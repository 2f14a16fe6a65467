"""Whether a Postgres store lets anyone in: a connection over TCP without any password.

A server with `trust` authentication on its TCP port takes whoever reaches that port, under
any role name: the operator's other programs, and an agent whose network is the host's
(`network: shared`). Such an agent set its own task DONE with its review approved and wrote
the audit tables. T25's gates no longer trust those rows (core.control.history), but a store
anyone may write is still an open door: `t25 doctor` and `t25 serve` say so, and
`sandbox: required` refuses to run agents on the host's network beside it.

    accepts_without_password(url) -> a one-line warning when it does, else None
"""

from __future__ import annotations

import asyncio
import contextlib
from urllib.parse import urlsplit, urlunsplit

import asyncpg

TIMEOUT_S = 5.0


def _without_password(url: str) -> str | None:
    """The URL with no password and no password file, over TCP; None for a socket path."""
    parts = urlsplit(url)
    host = parts.hostname or ""
    if not host or host.startswith("/"):
        return None
    user = parts.username or "postgres"
    port = f":{parts.port}" if parts.port else ""
    shown_host = f"[{host}]" if ":" in host else host
    query = "&".join(
        p for p in parts.query.split("&") if p and not p.startswith(("passfile=", "password="))
    )
    return urlunsplit(parts._replace(netloc=f"{user}@{shown_host}{port}", query=query))


async def accepts_without_password(url: str) -> str | None:
    """A warning naming the store when its server lets a client in over TCP without any
    password (trust authentication); None when it asks for one, or cannot be reached."""
    if not url.startswith(("postgresql:", "postgres:")):
        return None
    bare = _without_password(url)
    if bare is None:
        return None
    try:
        con = await asyncio.wait_for(
            asyncpg.connect(bare, passfile="/dev/null", password=""), TIMEOUT_S
        )
    except Exception:  # noqa: BLE001 - refused (a password is asked for), or unreachable
        return None
    with contextlib.suppress(Exception):
        await con.close(timeout=2)
    where = urlsplit(bare).netloc
    return (
        f"the Postgres store at {where} lets a client in over TCP without a password (trust "
        "authentication): anything that reaches that port can rewrite T25's records; give its "
        "role a password (pg_hba.conf: scram-sha-256) and keep it in a file (docs/guides/production.md)"
    )
