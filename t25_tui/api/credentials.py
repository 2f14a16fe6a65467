"""Where the secrets that open `t25 serve` come from, besides T25's environment.

Every operator request needs a credential, on loopback too: anything that reaches serve's
port - an agent's code included, if it ever gets through its sandbox - is a caller like any
other. On the serve's own host it is automatic:

    .factory/operator-token   made by serve (0600, in a 0700 directory hidden from every
                              sandbox) and read by the `t25` command and cockpit of the same
                              checkout; its operator is the account serve runs as

Elsewhere an operator's token comes from a file, so that nothing has to be typed on a
command line (where a shell's history keeps it): `--token-file PATH` or
`T25_OPERATOR_TOKEN_FILE`, else `T25_OPERATOR_TOKEN`.

Workers present `FACTORY_WORKER_CREDENTIAL` (named `worker`) or one of the named
credentials of `T25_WORKER_CREDENTIALS`: a file of `NAME sha256:HEX` lines, read again
whenever it changes, so that removing a line revokes that worker at once.

    local_token(root)               -> this checkout's serve token, made on first use
    operator_token(root, file=...)  -> the token a client of serve sends, or None
    WorkerCredentials.from_env()    -> the credentials serve accepts from workers
"""

from __future__ import annotations

import contextlib
import getpass
import hashlib
import hmac
import logging
import os
import re
import secrets
from pathlib import Path

from core.config import held_secrets
from core.control.keyring import create_whole
from core.errors import ConfigError

log = logging.getLogger("t25.serve")

LOCAL_TOKEN = Path(".factory") / "operator-token"
TOKEN_FILE_ENV = "T25_OPERATOR_TOKEN_FILE"
WORKERS_ENV = "T25_WORKER_CREDENTIALS"
SINGLE_WORKER = "worker"  # who FACTORY_WORKER_CREDENTIAL is
_WORKER_LINE = re.compile(r"([A-Za-z0-9][A-Za-z0-9._@-]{0,63})\s+sha256:([0-9a-f]{64})")


def local_operator() -> str:
    """Who the host's own token stands for: the account serve runs as."""
    try:
        return getpass.getuser()
    except (KeyError, OSError):
        return f"uid-{os.getuid()}"


def local_token(root: Path) -> str:
    """The token of the serve of the checkout at `root`, for the operators on its host:
    read, or made (random, 0600) when there is none yet."""
    path = root / LOCAL_TOKEN
    with contextlib.suppress(FileNotFoundError):
        return _read(path)
    try:
        path.parent.mkdir(mode=0o700, parents=True, exist_ok=True)
        create_whole(path, secrets.token_urlsafe(32) + "\n")
    except FileExistsError:  # another serve of this checkout made it meanwhile
        pass
    except OSError as exc:
        raise ConfigError(
            f"cannot make the operator token {path}: {exc.strerror}",
            hint="serve needs it to know this host's operator; free the disk or fix the "
            "permissions of .factory/",
        ) from None
    return _read(path)


def _read(path: Path) -> str:
    token = path.read_text(encoding="utf-8").strip()
    if not token:
        raise ConfigError(f"{path} is empty", hint="remove it: serve makes a new one")
    return token


def read_token_file(path: Path) -> str:
    """An operator's token from the file that holds it (its first line)."""
    try:
        return _read(path.expanduser())
    except OSError as exc:
        raise ConfigError(
            f"cannot read the operator token in {path}: {exc.strerror}",
            hint="write the token alone in that file, readable by you only (chmod 600)",
        ) from None


def operator_token(root: Path | None, file: Path | None = None) -> str | None:
    """The token a client of serve sends: `file` (`--token-file`), T25_OPERATOR_TOKEN_FILE,
    T25_OPERATOR_TOKEN, else the token of the serve of the checkout at `root`, when that
    serve made one; None when there is none of these."""
    named = file or (Path(os.environ[TOKEN_FILE_ENV]) if os.environ.get(TOKEN_FILE_ENV) else None)
    if named is not None:
        return read_token_file(named)
    if given := held_secrets.get(held_secrets.OPERATOR_TOKEN):
        return given
    if root is not None and (root / LOCAL_TOKEN).is_file():
        return read_token_file(root / LOCAL_TOKEN)
    return None


def _digest(token: bytes) -> bytes:
    return hashlib.sha256(token).digest()


class WorkerCredentials:
    """The credentials serve accepts from workers, each named; the file's are read again
    when it changes (a line removed: that worker is refused from its next request)."""

    def __init__(self, single: str | None, listed: Path | None) -> None:
        self._single = _digest(single.encode()) if single else None
        self._listed = listed
        self._seen: tuple[float, int] | None = None
        self._by_digest: dict[bytes, str] = {}
        if listed is not None:
            self._reload()

    @classmethod
    def from_env(cls) -> WorkerCredentials:
        listed = os.environ.get(WORKERS_ENV, "").strip()
        return cls(
            held_secrets.get(held_secrets.WORKER_CREDENTIAL), Path(listed) if listed else None
        )

    @property
    def any(self) -> bool:
        """Whether any credential is known: without one, serve accepts no worker."""
        return self._single is not None or self._listed is not None

    def match(self, token: bytes) -> str | None:
        """The name of the worker whose credential this is; every entry compared in
        constant time. A file that can no longer be read accepts no one (logged)."""
        if self._listed is not None:
            try:
                self._reload()
            except (ConfigError, OSError, UnicodeDecodeError) as exc:
                log.error(
                    "%s: every listed worker is refused until it reads again: %s", WORKERS_ENV, exc
                )
                self._by_digest, self._seen = {}, None
        given, found = _digest(token), None
        if self._single is not None and hmac.compare_digest(given, self._single):
            found = SINGLE_WORKER
        for digest, name in self._by_digest.items():
            if hmac.compare_digest(given, digest):
                found = name
        return found

    def _reload(self) -> None:
        assert self._listed is not None
        try:
            stat = self._listed.stat()
        except OSError as exc:
            raise ConfigError(
                f"{WORKERS_ENV}: cannot read {self._listed}: {exc.strerror}",
                hint="point it at a file of `NAME sha256:HEX` lines",
            ) from None
        seen = (stat.st_mtime, stat.st_size)
        if seen == self._seen:
            return
        by_digest: dict[bytes, str] = {}
        text = self._listed.read_text(encoding="utf-8")
        for number, raw in enumerate(text.splitlines(), start=1):
            line = raw.split("#", 1)[0].strip()
            if not line:
                continue
            found = _WORKER_LINE.fullmatch(line)
            if found is None:
                raise ConfigError(
                    f"{self._listed}:{number}: expected `NAME sha256:HEX`",
                    hint="HEX is the credential's SHA-256: printf %s CREDENTIAL | sha256sum",
                )
            by_digest[bytes.fromhex(found[2])] = found[1]
        self._by_digest, self._seen = by_digest, seen
