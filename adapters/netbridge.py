"""The bridge inside a confined run's network namespace: its loopback to T25's proxy.

Started by bubblewrap as the run's first process (an isolated interpreter, the standard
library only), it listens on the sandbox's own loopback, then execs the run's command, which
keeps its pid, its exit status and its signals:

    netbridge.py SOCKET PROXY_PORT [FORWARD_PORT ...] -- COMMAND ...

- PROXY_PORT is the proxy the run's proxy variables name (HTTPS_PROXY, ALL_PROXY, ...):
  each connection is carried to the Unix socket as it is.
- each FORWARD_PORT is a loopback endpoint on the run's allowlist (a model server on the
  host's 127.0.0.1:PORT): a connection to the sandbox's own 127.0.0.1:PORT is carried to the
  host's through the proxy (a CONNECT it decides like any other), so a CLI that connects
  there directly, proxy variables or not, still reaches it.

Nothing here decides anything: a process in the sandbox can talk to the socket itself, so
every decision is the proxy's, on the host. The bridge only moves bytes; when the command
ends, the sandbox ends and the bridge with it.
"""

from __future__ import annotations

import os
import socket
import sys
import threading

PROXY_VARIABLES = (
    "HTTPS_PROXY",
    "HTTP_PROXY",
    "ALL_PROXY",
    "https_proxy",
    "http_proxy",
    "all_proxy",
    "npm_config_proxy",
    "npm_config_https_proxy",
    "YARN_HTTP_PROXY",
    "YARN_HTTPS_PROXY",
    "PIP_PROXY",
    "CARGO_HTTP_PROXY",
)
LOOPBACK = "localhost,127.0.0.1,::1"


def _listen(port: int) -> list[socket.socket]:
    out = []
    for family, host in ((socket.AF_INET, "127.0.0.1"), (socket.AF_INET6, "::1")):
        try:
            sock = socket.socket(family, socket.SOCK_STREAM)
            sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
            sock.bind((host, port))
            sock.listen(64)
            out.append(sock)
        except OSError:
            if family == socket.AF_INET:
                raise
    return out


def _pump(source: socket.socket, target: socket.socket) -> None:
    try:
        while data := source.recv(65536):
            target.sendall(data)
        target.shutdown(socket.SHUT_WR)
    except OSError:
        for sock in (source, target):
            try:
                sock.shutdown(socket.SHUT_RDWR)
            except OSError:
                pass


def _tunnel(path: str, port: int) -> socket.socket | None:
    """A connection through the proxy to the host's 127.0.0.1:port, or None if refused."""
    upstream = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    upstream.connect(path)
    upstream.sendall(
        f"CONNECT 127.0.0.1:{port} HTTP/1.1\r\nHost: 127.0.0.1:{port}\r\n\r\n".encode()
    )
    head = b""
    while b"\r\n\r\n" not in head:
        data = upstream.recv(1)
        if not data or len(head) > 16384:
            upstream.close()
            return None
        head += data
    if head.split(b" ", 2)[1:2] != [b"200"]:
        upstream.close()
        return None
    return upstream


def _serve(client: socket.socket, path: str, forward: int | None) -> None:
    upstream: socket.socket | None = None
    try:
        if forward is None:
            upstream = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
            upstream.connect(path)
        else:
            upstream = _tunnel(path, forward)
    except OSError:
        upstream = None
    if upstream is None:
        client.close()
        return
    back = threading.Thread(target=_pump, args=(upstream, client), daemon=True)
    back.start()
    _pump(client, upstream)
    back.join()
    client.close()
    upstream.close()


def _accept(listener: socket.socket, path: str, forward: int | None) -> None:
    while True:
        try:
            client, _ = listener.accept()
        except OSError:
            return
        threading.Thread(target=_serve, args=(client, path, forward), daemon=True).start()


def _bridge(listeners: list[tuple[socket.socket, int | None]], path: str) -> None:
    threads = [
        threading.Thread(target=_accept, args=(sock, path, forward), daemon=True)
        for sock, forward in listeners
    ]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()


def main(argv: list[str]) -> int:
    if "--" not in argv or len(argv) < argv.index("--") + 2 or argv.index("--") < 2:
        print(
            "usage: netbridge.py SOCKET PROXY_PORT [FORWARD_PORT ...] -- COMMAND", file=sys.stderr
        )
        return 2
    split = argv.index("--")
    path, port = argv[0], int(argv[1])
    forwards = [int(p) for p in argv[2:split]]
    command = argv[split + 1 :]
    listeners: list[tuple[socket.socket, int | None]] = []
    try:
        listeners += [(sock, None) for sock in _listen(port)]
        for forward in forwards:
            listeners += [(sock, forward) for sock in _listen(forward)]
    except OSError as exc:
        print(f"t25: the network bridge cannot listen inside the sandbox: {exc}", file=sys.stderr)
        return 125
    if os.fork() == 0:  # the bridge: none of the run's pipes held open
        null = os.open(os.devnull, os.O_RDWR)
        for fd in (0, 1, 2):
            os.dup2(null, fd)
        _bridge(listeners, path)
        os._exit(0)
    for sock, _ in listeners:
        sock.close()
    proxy = f"http://127.0.0.1:{port}"
    os.environ.update(dict.fromkeys(PROXY_VARIABLES, proxy))
    os.environ.update(NO_PROXY=LOOPBACK, no_proxy=LOOPBACK, NODE_USE_ENV_PROXY="1")
    try:
        os.execvp(command[0], command)
    except OSError as exc:
        print(f"t25: cannot start {command[0]}: {exc.strerror}", file=sys.stderr)
        return 127


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
