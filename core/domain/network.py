"""Which hosts a confined run may reach, decided on facts the run cannot bend.

A run under `network: allowlist` has a network namespace of its own; its only way out is
T25's proxy on the host (adapters.netproxy), which asks this module, for every connection,
whether the run's allowlist names the destination (entries: core.config.hosts). Deny by
default: an empty list allows nothing.

A name is resolved once by the proxy, every address it resolves to is checked, and the
connection goes to an address that was checked. Loopback, private, link-local, multicast,
reserved and cloud-metadata addresses, and this host's own, are refused whatever name led to
them, unless an entry names exactly that address and port (a model server on loopback).

    Allowlist.of(entries).decide(host, port, addresses, own) -> Verdict
    Connection      one decided connection, as the run's record
    tally(records)  -> the records counted by run, destination and verdict
"""

from __future__ import annotations

import ipaddress
import json
from collections.abc import Iterable, Sequence
from dataclasses import asdict, dataclass
from typing import Any

from pydantic import BaseModel, ConfigDict

from core.config.hosts import LOOPBACK_NAMES, HostRule, IPAddress, is_public, valid_host

# The output stream a run's connection records travel on, beside stdout and stderr.
NETWORK_STREAM = "network"

METADATA = frozenset(
    ipaddress.ip_address(a) for a in ("169.254.169.254", "fd00:ec2::254", "100.100.100.200")
)


def why_not_public(address: IPAddress, own: Iterable[IPAddress] = ()) -> str | None:
    """Why a connection to `address` would stay on this machine or its network, or None."""
    if isinstance(address, ipaddress.IPv6Address) and address.ipv4_mapped is not None:
        return why_not_public(address.ipv4_mapped, own)
    if address in METADATA:
        return "a cloud metadata address"
    for test, reason in (
        (address.is_loopback, "a loopback address"),
        (address.is_link_local, "a link-local address"),
        (address.is_multicast, "a multicast address"),
        (address.is_unspecified, "the unspecified address"),
        (address.is_private, "a private address"),
        (not is_public(address), "not a public address"),
    ):
        if test:
            return reason
    if address in set(own):  # a public address of this host: its services listen there too
        return "an address of this host"
    return None


@dataclass(frozen=True)
class Verdict:
    """A decision on one destination: where to connect, or why not."""

    allowed: bool
    reason: str
    addresses: tuple[IPAddress, ...] = ()  # what may be connected to, in order


class Allowlist:
    """One run's allowlist: its CLI's model endpoints and what the project adds."""

    def __init__(self, rules: Iterable[HostRule]) -> None:
        self.rules = tuple(dict.fromkeys(rules))

    @classmethod
    def of(cls, entries: Iterable[str]) -> Allowlist:
        return cls(HostRule.parse(entry) for entry in entries)

    def __str__(self) -> str:
        return ", ".join(map(str, self.rules)) or "(nothing)"

    def loopback_ports(self) -> tuple[int, ...]:
        """The ports of the loopback endpoints it names (a model server on the host's
        127.0.0.1): the sandbox's own loopback forwards them (adapters.netbridge)."""
        return tuple(
            sorted(
                {
                    rule.port
                    for rule in self.rules
                    if rule.port is not None
                    and (rule.host in LOOPBACK_NAMES or (rule.address and rule.address.is_loopback))
                }
            )
        )

    def rule_for(self, host: str, port: int) -> HostRule | None:
        """The entry that names `host` on `port`, before anything is resolved."""
        host = host.lower().removesuffix(".")
        if not valid_host(host):
            return None
        return next((rule for rule in self.rules if rule.names(host, port)), None)

    def decide(
        self, host: str, port: int, addresses: Sequence[IPAddress], own: Iterable[IPAddress] = ()
    ) -> Verdict:
        """Whether `host:port`, which resolved to `addresses`, may be reached. Every address
        must be public, or named exactly with its port by an entry; one that is not refuses
        the whole name (a name that resolves partly to this network is not trusted)."""
        if self.rule_for(host, port) is None:
            return Verdict(False, "not on the allowlist")
        if not addresses:
            return Verdict(False, "the name did not resolve")
        own = tuple(own)
        for address in addresses:
            local = why_not_public(address, own)
            if local and not any(rule.exact(address, port) for rule in self.rules):
                return Verdict(False, f"resolves to {address}, {local}")
        return Verdict(True, "allowed", tuple(addresses))


@dataclass(frozen=True)
class Connection:
    """One connection a confined run asked for, as T25's proxy decided and relayed it."""

    host: str
    port: int
    allowed: bool
    reason: str
    via: str  # connect | http | socks
    sent: int = 0  # bytes from the run
    received: int = 0  # bytes to the run

    def to_text(self) -> str:
        return json.dumps(asdict(self), separators=(",", ":"))

    @classmethod
    def from_text(cls, text: str) -> Connection | None:
        """The record a run's `network` output line holds, or None for anything else."""
        try:
            data: Any = json.loads(text)
            return cls(**data) if isinstance(data, dict) else None
        except (ValueError, TypeError):
            return None

    @property
    def where(self) -> str:
        return f"[{self.host}]:{self.port}" if ":" in self.host else f"{self.host}:{self.port}"

    def line(self) -> str:
        """One line for a log: `network: denied 10.0.0.5:5432 (resolves to ..., a private
        address)` or `network: api.anthropic.com:443 (1.2 KB out, 30.1 KB in)`."""
        if not self.allowed:
            return f"network: denied {self.where} ({self.reason})"
        return f"network: {self.where} ({_size(self.sent)} out, {_size(self.received)} in)"


def _size(count: int) -> str:
    for unit, scale in (("MB", 10**6), ("KB", 10**3)):
        if count >= scale:
            return f"{count / scale:.1f} {unit}"
    return f"{count} B"


class ConnectionTally(BaseModel):
    """A run's connections to one destination with one verdict, counted: what `t25 task
    show` and the cockpit list (a run asking a host a hundred times is one line)."""

    model_config = ConfigDict(frozen=True, extra="forbid", defer_build=True)

    run_id: str
    host: str
    port: int
    allowed: bool
    reason: str
    count: int = 0
    sent: int = 0
    received: int = 0

    def line(self) -> str:
        where = f"[{self.host}]:{self.port}" if ":" in self.host else f"{self.host}:{self.port}"
        times = f" ×{self.count}" if self.count > 1 else ""
        if not self.allowed:
            return f"denied   {where}{times} ({self.reason})"
        return f"allowed  {where}{times} ({_size(self.sent)} out, {_size(self.received)} in)"


def tally(records: Iterable[tuple[str, str]]) -> list[ConnectionTally]:
    """(run id, a `network` output's text) pairs, counted by run, destination and verdict:
    the denied first, each run's in the order its destinations were first asked for."""
    counted: dict[tuple[str, str, int, bool, str], list[int]] = {}
    for run_id, text in records:
        c = Connection.from_text(text)
        if c is None:
            continue
        seen = counted.setdefault((run_id, c.host, c.port, c.allowed, c.reason), [0, 0, 0])
        seen[0], seen[1], seen[2] = seen[0] + 1, seen[1] + c.sent, seen[2] + c.received
    out = [
        ConnectionTally(
            run_id=run, host=host, port=port, allowed=ok, reason=why, count=n, sent=s, received=r
        )
        for (run, host, port, ok, why), (n, s, r) in counted.items()
    ]
    return sorted(out, key=lambda t: t.allowed)
