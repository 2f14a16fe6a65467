"""T25's sealing key: what makes a record T25's own, and not one somebody else wrote.

A gate that decides on a row, an event or an audit line decides on something anyone who can
write the store could have written: an agent that reached a Postgres with trust
authentication set its own task DONE and re-sealed a rewritten audit line with T25's own
hash. So the facts a gate relies on carry a MAC (HMAC-SHA256) under a key that lives outside
the database and outside every sandbox: a 0600 file in `.factory/` of the control plane's
checkout (`audit.key_file` in t25.yaml for serve replicas sharing one key). Without the key,
a rewritten line or event is caught by `t25 audit verify` and refused by `t25 merge`.

The file holds one key a line, `ID HEX CREATED` (hex of 32 random bytes, an ISO time); the
last line seals, every line verifies. `t25 audit rotate-key` adds a line: what the old keys
sealed still verifies, what comes next is sealed with the new one.

    Keyring.open(path)        -> the keyring at `path`, made (one key) when there is none
    keyring.seal(message)     -> "ID:HEX", the newest key's MAC of `message`
    keyring.check(message, s) -> whether `s` is a valid seal of `message` by one of its keys
"""

from __future__ import annotations

import contextlib
import hashlib
import hmac
import os
import secrets
import tempfile
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path

from core.errors import ConfigError

KEY_FILE = Path(".factory") / "audit.key"


@dataclass(frozen=True)
class Key:
    id: str
    secret: bytes
    created: datetime


class Keyring:
    """The keys of one installation, oldest first; the newest seals."""

    def __init__(self, path: Path, keys: list[Key]) -> None:
        if not keys:
            raise ConfigError(f"{path} holds no key", hint="restore it from a backup")
        self.path = path
        self.keys = keys
        self._by_id = {key.id: key for key in keys}

    @classmethod
    def open(cls, path: Path) -> Keyring:
        """The keyring at `path`; made, with one new key, when the file does not exist."""
        with contextlib.suppress(FileNotFoundError):
            return cls._read(path)
        try:
            path.parent.mkdir(mode=0o700, parents=True, exist_ok=True)
            create_whole(path, _line(_new_key()))
        except FileExistsError:  # another process of this installation made it meanwhile
            pass
        except OSError as exc:
            raise ConfigError(
                f"cannot make T25's sealing key {path}: {exc.strerror}",
                hint="T25 seals its audit log and its gates' facts with it; check .factory/",
            ) from None
        return cls._read(path)

    @classmethod
    def _read(cls, path: Path) -> Keyring:
        text = path.read_text(encoding="ascii")
        keys = []
        for number, line in enumerate(text.splitlines(), start=1):
            if not line.strip():
                continue
            try:
                kid, hexed, created = line.split()
                keys.append(Key(kid, bytes.fromhex(hexed), datetime.fromisoformat(created)))
            except ValueError:
                raise ConfigError(
                    f"{path}:{number}: not a key (`ID HEX CREATED`)",
                    hint="the file is T25's; restore it from a backup rather than edit it",
                ) from None
        return cls(path, keys)

    @property
    def created(self) -> datetime:
        """When the first key was made: records written since carry a seal."""
        return self.keys[0].created

    def seal(self, message: bytes) -> str:
        key = self.keys[-1]
        return f"{key.id}:{hmac.new(key.secret, message, hashlib.sha256).hexdigest()}"

    def check(self, message: bytes, seal: object) -> bool:
        return self.problem(message, seal) is None

    def problem(self, message: bytes, seal: object) -> str | None:
        """Why `seal` does not make `message` T25's, or None when it does."""
        if not isinstance(seal, str) or ":" not in seal:
            return "its seal is not T25's: it was written or rewritten without T25's key"
        kid, _, given = seal.partition(":")
        key = self._by_id.get(kid)
        if key is None:
            return (
                f"it is sealed by key {kid}, which {self.path} does not hold: another "
                "installation wrote it (checkouts and replicas sharing a store share one "
                "audit.key_file), or the key file was replaced"
            )
        wanted = hmac.new(key.secret, message, hashlib.sha256).hexdigest()
        if not hmac.compare_digest(wanted, given):
            return "its seal is not T25's: it was written or rewritten without T25's key"
        return None

    def rotate(self) -> Key:
        """Add a new key that seals from now on; the older ones still verify."""
        key = _new_key()
        with self.path.open("a", encoding="ascii") as file:
            file.write(_line(key))
            file.flush()
            os.fsync(file.fileno())
        self.keys.append(key)
        self._by_id[key.id] = key
        return key


def create_whole(path: Path, text: str) -> None:
    """Make `path` (0600) holding `text`, whole or not at all: written beside it, then linked
    into place (FileExistsError when another process made it first). A reader never sees
    it half written."""
    fd, spare = tempfile.mkstemp(prefix=f".{path.name}.", dir=path.parent)  # 0600
    try:
        with os.fdopen(fd, "w", encoding="ascii") as file:
            file.write(text)
            file.flush()
            os.fsync(file.fileno())
        os.link(spare, path)
    finally:
        os.unlink(spare)


def _new_key() -> Key:
    """A new key, its id random: two installations' keys never share one."""
    return Key(secrets.token_hex(4), secrets.token_bytes(32), datetime.now(UTC))


def _line(key: Key) -> str:
    return f"{key.id} {key.secret.hex()} {key.created.isoformat()}\n"
