"""Where PR_OPEN's push goes, pinned to what the operator configured before any run.

`remote.origin.receivepack` is a program git runs for the push, and `pushurl` or `url`
send it elsewhere; code the dev agent wrote runs in QA and could set either in the shared
`.git/config` for the push that follows. So the settings are read once, when T25 makes
the repository's `Worktrees` (before any run of this process), and the push is made to
those URLs given as arguments, with that receive-pack: no remote is looked up by name.

What a push reads besides — credential helpers, URL rewriting (`url.*.insteadOf`, which
applies to a URL given as an argument too), `http.*`, `core.sshCommand` and its kin — the
operator may need, so it cannot be switched off; the push is refused instead when any of
it differs from what was read at the start.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from core.errors import GitError
from core.workspace.git import git, git_sync

REMOTE = "origin"
# The config a push reads; git prints keys lower-cased (but a subsection's own spelling).
_PUSH_KEYS = r"^(remote\.origin\.|url\.|credential|http\.|core\.(sshcommand|askpass|gitproxy)$)"
_ORIGIN = f"remote.{REMOTE}."
_DEFAULT_RECEIVE_PACK = "git-receive-pack"


@dataclass(frozen=True)
class PushSettings:
    """The operator's push settings for `origin`, as T25 found them when it started."""

    urls: tuple[str, ...] = ()  # origin's push URLs: its pushurl values, else its url
    receive_pack: str = _DEFAULT_RECEIVE_PACK
    other: tuple[str, ...] = ()  # every other setting a push reads, as `key=value`

    def changed(self, now: PushSettings) -> list[str]:
        """The settings a push reads besides the pinned ones that are not as they were."""
        old, new = set(self.other), set(now.other)
        return [f"+{e}" for e in sorted(new - old)] + [f"-{e}" for e in sorted(old - new)]


def read_push_settings(repo: Path) -> PushSettings:
    """The push settings of `repo` now (none when git cannot read it). Reading runs nothing."""
    try:
        out = git_sync("config", "--null", "--get-regexp", _PUSH_KEYS, cwd=repo, check=False)
    except GitError:
        return PushSettings()
    return _parsed(out)


async def current_push_settings(repo: Path) -> PushSettings:
    out = await git(
        "config", "--null", "--get-regexp", _PUSH_KEYS, cwd=repo, check=False, drivers_from=()
    )
    return _parsed(out)


def _parsed(out: str) -> PushSettings:
    entries = [e.partition("\n") for e in out.split("\0") if e]
    origin: dict[str, list[str]] = {}
    other = []
    for key, _, value in entries:
        if key.startswith(_ORIGIN):
            origin.setdefault(key.removeprefix(_ORIGIN), []).append(value)
        else:
            other.append(f"{key}={value}")
    urls = origin.get("pushurl") or origin.get("url") or []
    receive_pack = (origin.get("receivepack") or [_DEFAULT_RECEIVE_PACK])[-1]
    return PushSettings(tuple(urls), receive_pack, tuple(sorted(other)))
