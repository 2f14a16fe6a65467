"""T25's proxy on the host: a confined run's only way out of its empty network namespace.

One `RunProxy` serves one run, on a Unix socket that the sandbox binds in; the bridge inside
(adapters/netbridge.py) carries the run's connections to it. Every connection is decided by
the run's allowlist (core.domain.network) and recorded, allowed or denied, with the bytes it
carried each way. It speaks what the agent CLIs and their tools use:

    CONNECT host:port HTTP/1.1           a tunnel (HTTPS), answered 200 or 403
    GET http://host:port/path HTTP/1.1   plain HTTP in absolute form, forwarded to the host
    SOCKS5 (no authentication, CONNECT)  for a client configured with socks5h://

A name is resolved here, once; every address is checked and the connection goes to an
address that was checked (never resolved again). The first request of a plain-HTTP
connection decides its destination: whatever else the client sends on it goes to that host
and no other. The proxy is written here rather than taken from a library: what it must do
(decide per connection, on an allowlist, from a Unix socket, recording bytes) is a few hundred
lines, and the well-kept proxies (mitmproxy, proxy.py) bring a TLS stack and plugin
frameworks T25 does not use.

    async with RunProxy(allowlist, record) as proxy:   proxy.socket: where the bridge connects
    async with run_network(box, allowlist, record) as (box, proxy):  box with its proxy
"""

from __future__ import annotations

import asyncio
import contextlib
import ipaddress
import itertools
import logging
import socket
import tempfile
from collections.abc import AsyncIterator, Awaitable, Callable
from dataclasses import dataclass, replace
from pathlib import Path
from types import TracebackType
from urllib.parse import urlsplit

from adapters.sandbox import Confinement
from core.config.hosts import IPAddress, ip_literal, valid_host
from core.domain.network import Allowlist, Connection, Verdict

log = logging.getLogger("t25.adapters")

HEAD_LIMIT = 16384  # a request head larger than this is refused
CONNECT_TIMEOUT_S = 30.0
MAX_CONNECTIONS = 256  # at once, per run
ENDING_S = 1.0  # how long connections get to close once the run has ended
CHUNK = 65536
# Past this many records a run's further connections are counted, not each recorded.
MAX_RECORDS = 1000

Record = Callable[[Connection], Awaitable[None]]


def own_addresses() -> tuple[IPAddress, ...]:
    """This host's own interface addresses (a service listening on 0.0.0.0 is reachable
    through them), read from /proc; none where /proc does not say."""
    found: set[IPAddress] = set()
    with contextlib.suppress(OSError):
        lines = Path("/proc/net/fib_trie").read_text().splitlines()
        for before, line in itertools.pairwise(lines):
            if "/32 host LOCAL" in line and "|--" in before:
                with contextlib.suppress(ValueError):
                    found.add(ipaddress.ip_address(before.split("|--")[1].strip()))
    with contextlib.suppress(OSError):
        for line in Path("/proc/net/if_inet6").read_text().splitlines():
            digits = line.split()[0]
            with contextlib.suppress(ValueError):
                found.add(ipaddress.ip_address(int(digits, 16)))
    return tuple(found)


class _Refused(Exception):
    """The connection is not relayed; the message says why (and goes to the record)."""

    def __init__(self, reason: str, host: str = "", port: int = 0, via: str = "") -> None:
        super().__init__(reason)
        self.host, self.port, self.via = host, port, via


@dataclass(frozen=True)
class _Route:
    """An allowed connection, its upstream open: what is relayed, and what was sent ahead."""

    host: str
    port: int
    upstream: tuple[asyncio.StreamReader, asyncio.StreamWriter]
    via: str
    sent: int = 0  # the request head sent on the client's behalf (plain HTTP)


class RunProxy:
    """One run's proxy: listens on a Unix socket in a private directory, decides and relays
    each connection, and hands each one's record to `record` as it ends."""

    def __init__(
        self,
        allowlist: Allowlist,
        record: Record | None = None,
        *,
        resolve: Callable[[str, int], Awaitable[list[IPAddress]]] | None = None,
    ) -> None:
        self.allowlist = allowlist
        self._record = record
        self._resolve = resolve or _resolve
        self._own = own_addresses()
        self._dir: tempfile.TemporaryDirectory[str] | None = None
        self._server: asyncio.AbstractServer | None = None
        self._handlers: set[asyncio.Task[None]] = set()
        self._slots = asyncio.Semaphore(MAX_CONNECTIONS)
        self.records: list[Connection] = []  # the last ones, for a check's excerpt
        self.recorded = 0
        self.unrecorded = 0

    @property
    def directory(self) -> Path:
        assert self._dir is not None, "the proxy is not started"
        return Path(self._dir.name)

    @property
    def socket(self) -> Path:
        return self.directory / "proxy.sock"

    async def __aenter__(self) -> RunProxy:
        self._dir = tempfile.TemporaryDirectory(prefix="t25-net-")
        self._server = await asyncio.start_unix_server(self._serve, path=str(self.socket))
        return self

    async def __aexit__(
        self, kind: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        if self._server is not None:
            self._server.close()
        if self._handlers:  # the run ended: its connections close with its sandbox
            await asyncio.wait(set(self._handlers), timeout=ENDING_S)
        for task in list(self._handlers):
            task.cancel()
        if self._handlers:
            await asyncio.gather(*self._handlers, return_exceptions=True)
        if self._server is not None:
            with contextlib.suppress(Exception):
                await self._server.wait_closed()
        if self._dir is not None:
            self._dir.cleanup()

    async def _serve(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        task = asyncio.current_task()
        assert task is not None
        self._handlers.add(task)
        try:
            if self._slots.locked():
                await self._note(Connection("", 0, False, "too many connections at once", "?"))
                return
            async with self._slots:
                await self._handle(reader, writer)
        finally:
            self._handlers.discard(task)
            writer.close()
            with contextlib.suppress(Exception):
                await writer.wait_closed()

    async def _note(self, connection: Connection) -> None:
        if self.recorded >= MAX_RECORDS:
            self.unrecorded += 1
            return
        self.recorded += 1
        self.records.append(connection)
        del self.records[:-50]
        if self._record is not None:
            try:
                await self._record(connection)
            except Exception:  # a lost record never breaks the run's connection
                log.exception("a network record could not be kept")

    async def _handle(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        try:
            first = await reader.readexactly(1)
        except (asyncio.IncompleteReadError, ConnectionError):
            return
        via = "socks" if first == b"\x05" else "http"
        try:
            if via == "socks":
                route = await self._socks(reader, writer)
            else:
                route = await self._http(first, reader, writer)
        except _Refused as refused:
            record = Connection(refused.host, refused.port, False, str(refused), refused.via or via)
            await self._note(record)
            return
        except (asyncio.IncompleteReadError, ConnectionError, asyncio.LimitOverrunError):
            return
        moved = [route.sent, 0]
        try:
            await _relay(reader, writer, *route.upstream, moved)
        finally:  # a relay cut short by the run's end is recorded with what it carried
            sent, received = moved
            await self._note(
                Connection(route.host, route.port, True, "allowed", route.via, sent, received)
            )

    async def _decide(self, host: str, port: int) -> Verdict:
        host = host.lower().removesuffix(".")
        if not valid_host(host):
            raise _Refused("not a valid host name", _printable(host), port)
        if not 0 < port < 65536:
            raise _Refused("not a valid port", host, port)
        if self.allowlist.rule_for(host, port) is None:
            raise _Refused("not on the allowlist", host, port)
        try:
            addresses = await self._resolve(host, port)
        except OSError as exc:
            raise _Refused(
                f"the name did not resolve ({exc.strerror or exc})", host, port
            ) from None
        verdict = self.allowlist.decide(host, port, addresses, self._own)
        if not verdict.allowed:
            raise _Refused(verdict.reason, host, port)
        return verdict

    async def _open(
        self, host: str, port: int, verdict: Verdict
    ) -> tuple[asyncio.StreamReader, asyncio.StreamWriter]:
        """A connection to the first checked address that answers."""
        last: Exception | None = None
        for address in verdict.addresses:
            try:
                return await asyncio.wait_for(
                    asyncio.open_connection(str(address), port), CONNECT_TIMEOUT_S
                )
            except (OSError, TimeoutError) as exc:
                last = exc
        raise _Refused(f"could not connect ({last})", host, port)

    async def _http(
        self, first: bytes, reader: asyncio.StreamReader, writer: asyncio.StreamWriter
    ) -> _Route:
        head = first + await _head(reader)
        line, _, rest = head.partition(b"\r\n")
        parts = line.split(b" ")
        if len(parts) != 3 or not parts[2].startswith(b"HTTP/"):
            await _answer(writer, 400, "not an HTTP proxy request")
            raise _Refused("not an HTTP proxy request")
        method, target = parts[0].decode("latin-1"), parts[1].decode("latin-1")
        if method == "CONNECT":
            host, port = _authority(target, default=443)
            try:
                verdict = await self._decide(host, port)
                upstream = await self._open(host, port, verdict)
            except _Refused as refused:
                await _answer(writer, 403, f"t25: {refused.host}:{refused.port} {refused}")
                refused.via = "connect"
                raise
            await _opened(writer, b"HTTP/1.1 200 Connection established\r\n\r\n", upstream)
            return _Route(host, port, upstream, "connect")
        url = urlsplit(target)
        if url.scheme != "http" or not url.hostname:
            await _answer(writer, 400, "only http:// URLs in absolute form, or CONNECT")
            host, port = _printable(url.hostname or ""), 443 if url.scheme == "https" else 0
            raise _Refused("not an absolute http:// URL (https goes by CONNECT)", host, port)
        try:
            host, port = url.hostname, url.port or 80
        except ValueError:  # a port that is not a number
            await _answer(writer, 400, "a bad port")
            raise _Refused("a bad port", _printable(url.hostname)) from None
        try:
            verdict = await self._decide(host, port)
            upstream = await self._open(host, port, verdict)
        except _Refused as refused:
            await _answer(writer, 403, f"t25: {refused.host}:{refused.port} {refused}")
            raise
        path = (url.path or "/") + (f"?{url.query}" if url.query else "")
        headers = [
            h for h in rest.split(b"\r\n") if not h.lower().startswith((b"proxy-", b"connection:"))
        ]
        request = f"{method} {path} {parts[2].decode('latin-1')}".encode("latin-1")
        ahead = b"\r\n".join([request, b"Connection: close", *headers])
        upstream[1].write(ahead)
        return _Route(host, port, upstream, "http", len(ahead))

    async def _socks(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> _Route:
        methods = await reader.readexactly((await reader.readexactly(1))[0])
        if 0 not in methods:
            writer.write(b"\x05\xff")
            raise _Refused("SOCKS5 without a method T25 accepts (no authentication)")
        writer.write(b"\x05\x00")
        version, command, _, kind = await reader.readexactly(4)
        if kind == 1:
            host = str(ipaddress.IPv4Address(await reader.readexactly(4)))
        elif kind == 4:
            host = str(ipaddress.IPv6Address(await reader.readexactly(16)))
        elif kind == 3:
            raw = await reader.readexactly((await reader.readexactly(1))[0])
            host = raw.decode("latin-1")
        else:
            raise _Refused("a SOCKS5 address of an unknown type")
        port = int.from_bytes(await reader.readexactly(2), "big")
        if version != 5 or command != 1:
            writer.write(b"\x05\x07\x00\x01" + bytes(6))
            raise _Refused("only SOCKS5 CONNECT", _printable(host), port)
        try:
            verdict = await self._decide(host, port)
            upstream = await self._open(host, port, verdict)
        except _Refused:
            writer.write(b"\x05\x02\x00\x01" + bytes(6))  # not allowed by ruleset
            raise
        await _opened(writer, b"\x05\x00\x00\x01" + bytes(6), upstream)
        return _Route(host, port, upstream, "socks")


async def _resolve(host: str, port: int) -> list[IPAddress]:
    literal = ip_literal(host)
    if literal is not None:
        return [literal]
    loop = asyncio.get_running_loop()
    found = await loop.getaddrinfo(host, port, type=socket.SOCK_STREAM)
    return list(dict.fromkeys(ipaddress.ip_address(str(info[4][0])) for info in found))


def _printable(host: str) -> str:
    """A refused name as a record may show it: control bytes escaped."""
    return host.encode("unicode_escape").decode("ascii")[:255]


def _authority(target: str, default: int) -> tuple[str, int]:
    host, sep, port = target.rpartition(":")
    if not sep or not port.isdigit():
        return target.strip("[]"), default
    return host.strip("[]"), int(port)


async def _head(reader: asyncio.StreamReader) -> bytes:
    """The rest of a request head, through its blank line; refused past HEAD_LIMIT."""
    head = b""
    while not head.endswith(b"\r\n\r\n"):
        line = await reader.readuntil(b"\n")
        head += line
        if len(head) > HEAD_LIMIT:
            raise _Refused("a request head over 16 KiB")
        if line in (b"\r\n", b"\n") and head.count(b"\n") > 1:
            break
    return head


async def _answer(writer: asyncio.StreamWriter, status: int, text: str) -> None:
    reason = {400: "Bad Request", 403: "Forbidden"}[status]
    body = (text + "\n").encode("utf-8", "replace")
    writer.write(
        f"HTTP/1.1 {status} {reason}\r\nContent-Type: text/plain\r\n"
        f"Content-Length: {len(body)}\r\nConnection: close\r\n\r\n".encode()
        + body
    )
    with contextlib.suppress(ConnectionError):
        await writer.drain()


async def _opened(
    writer: asyncio.StreamWriter,
    reply: bytes,
    upstream: tuple[asyncio.StreamReader, asyncio.StreamWriter],
) -> None:
    """Tell the client its connection is open; if it cannot be told (it went away, the run
    ended), the upstream connection just opened is closed with it, never left open."""
    try:
        writer.write(reply)
        await writer.drain()
    except BaseException:
        upstream[1].close()
        raise


async def _pump(
    reader: asyncio.StreamReader, writer: asyncio.StreamWriter, moved: list[int], way: int
) -> None:
    try:
        while data := await reader.read(CHUNK):
            writer.write(data)
            moved[way] += len(data)
            await writer.drain()
        if writer.can_write_eof():
            writer.write_eof()
    except (ConnectionError, OSError):
        writer.close()  # the other way ends too: nothing is left waiting on a dead peer


async def _relay(
    reader: asyncio.StreamReader,
    writer: asyncio.StreamWriter,
    up_reader: asyncio.StreamReader,
    up_writer: asyncio.StreamWriter,
    moved: list[int],
) -> None:
    """Carry bytes both ways until both sides are done, counting them in `moved` (sent,
    received) as they go."""
    try:
        await asyncio.gather(_pump(reader, up_writer, moved, 0), _pump(up_reader, writer, moved, 1))
    finally:
        up_writer.close()
        with contextlib.suppress(Exception):
            await up_writer.wait_closed()


@contextlib.asynccontextmanager
async def run_network(
    box: Confinement, allowlist: Allowlist, record: Record | None = None
) -> AsyncIterator[tuple[Confinement, RunProxy | None]]:
    """`box` with its own proxy for the run's life when its network is `allowlist`; as it
    is otherwise (shared, none: no proxy)."""
    if box.network != "allowlist":
        yield box, None
        return
    async with RunProxy(allowlist, record) as proxy:
        yield replace(box, proxy=proxy.socket, forwards=allowlist.loopback_ports()), proxy
