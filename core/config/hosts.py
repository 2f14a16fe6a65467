"""A host a confined run may reach, as t25.yaml names it (`sandbox.allow_hosts`).

An entry is one of

    api.anthropic.com        that host, on ports 443 and 80
    api.anthropic.com:8443   that host, on that port only
    *.example.com            any host below example.com (not example.com), on 443 and 80
    127.0.0.1:8080           exactly that address and port ([::1]:8080 for IPv6)
    localhost:8080           the loopback addresses, on that port only

A loopback, private or link-local address, or `localhost`, must come with its port: such an
entry allows that address and port and nothing else on it (core.domain.network).

    HostRule.parse(text)  -> HostRule, or ValueError saying why
    valid_host(text)      -> whether text is a hostname or an IP literal
    entry_for_url(url)    -> the entry a base URL's endpoint needs
"""

from __future__ import annotations

import ipaddress
import re
from dataclasses import dataclass
from urllib.parse import urlsplit

IPAddress = ipaddress.IPv4Address | ipaddress.IPv6Address

DEFAULT_PORTS = (443, 80)
LOOPBACK_NAMES = ("localhost",)
_LABEL = re.compile(r"(?!-)[a-z0-9-]{1,63}(?<!-)")


def ip_literal(text: str) -> IPAddress | None:
    try:
        return ipaddress.ip_address(text)
    except ValueError:
        return None


def valid_host(text: str) -> bool:
    """A hostname in the grammar (letters, digits, '-', dots; labels of 1-63; at most 253)
    or an IP literal; anything else - a NUL byte, a space, a '%', an '_' - is not."""
    if not text or len(text) > 253 or not text.isascii():
        return False
    if ip_literal(text) is not None:
        return True
    name = text.lower().removesuffix(".")
    return bool(name) and all(_LABEL.fullmatch(label) for label in name.split("."))


def is_public(address: IPAddress) -> bool:
    """Whether `address` lies on the internet rather than on this machine or its network."""
    if isinstance(address, ipaddress.IPv6Address) and address.ipv4_mapped is not None:
        return is_public(address.ipv4_mapped)
    return address.is_global and not address.is_multicast


@dataclass(frozen=True)
class HostRule:
    """One allowlist entry: a host (or `*.` a domain, or an IP literal) and its ports."""

    host: str  # lowercase; an IP literal in its compressed form; "*.x.y" for a domain
    port: int | None = None  # None: DEFAULT_PORTS

    @classmethod
    def parse(cls, text: str) -> HostRule:
        raw = text.strip()
        host, port = raw, None
        if raw.startswith("["):  # [v6]:port
            host, _, rest = raw[1:].partition("]")
            if rest and not rest.startswith(":"):
                raise ValueError(f"expected [address]:port, got {text!r}")
            port = _port(rest[1:], text) if rest else None
        elif raw.count(":") == 1:
            host, _, given = raw.partition(":")
            port = _port(given, text)
        wildcard = host.startswith("*.")
        name = (host[2:] if wildcard else host).lower().removesuffix(".")
        address = ip_literal(name)
        if not valid_host(name) or (wildcard and address is not None):
            raise ValueError(
                "expected a host such as api.anthropic.com, *.example.com or "
                f"127.0.0.1:8080, got {text!r}"
            )
        local = (address is not None and not is_public(address)) or name in LOOPBACK_NAMES
        if local and port is None:
            raise ValueError(
                f"{text!r} is not a public address: name its port too (such as "
                f"{host}:8080), which alone is then allowed"
            )
        if address is not None:
            name = str(address)
        return cls(host=("*." if wildcard else "") + name, port=port)

    def __str__(self) -> str:
        host = f"[{self.host}]" if ":" in self.host else self.host
        return host if self.port is None else f"{host}:{self.port}"

    @property
    def address(self) -> IPAddress | None:
        return ip_literal(self.host)

    def names(self, host: str, port: int) -> bool:
        """Whether this entry covers `host` (as the client named it) on `port`."""
        if port not in ((self.port,) if self.port is not None else DEFAULT_PORTS):
            return False
        if self.host.startswith("*."):
            return host.endswith(self.host[1:])
        literal = ip_literal(host)
        if literal is not None and self.address is not None:
            return literal == self.address
        return host == self.host

    def exact(self, address: IPAddress, port: int) -> bool:
        """Whether this entry names exactly `address` and `port` (a local model server)."""
        if self.port != port:
            return False
        if self.host in LOOPBACK_NAMES:
            return address.is_loopback
        return self.address == address


def _port(text: str, whole: str) -> int:
    if not text.isdigit() or not 0 < int(text) < 65536:
        raise ValueError(f"expected a port from 1 to 65535 in {whole!r}")
    return int(text)


def host_entry(text: str) -> str:
    """A t25.yaml entry, checked and written the one way (`API.example.com.` ->
    `api.example.com`)."""
    return str(HostRule.parse(text))


def entry_for_url(url: str) -> str | None:
    """The allowlist entry a base URL's endpoint needs (`http://127.0.0.1:8080/v1` ->
    `127.0.0.1:8080`, `https://api.example.com` -> `api.example.com`), or None for a
    URL that names no host."""
    parts = urlsplit(url.strip())
    try:
        host, port = parts.hostname, parts.port
    except ValueError:
        return None
    if not host or parts.scheme not in ("http", "https"):
        return None
    if port is None and not _public_name(host):
        port = 443 if parts.scheme == "https" else 80
    shown = f"[{host}]" if ":" in host else host
    entry = shown if port is None else f"{shown}:{port}"
    try:
        return host_entry(entry)
    except ValueError:
        return None


def _public_name(host: str) -> bool:
    address = ip_literal(host)
    return is_public(address) if address is not None else host not in LOOPBACK_NAMES
