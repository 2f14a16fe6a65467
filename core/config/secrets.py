"""Refusing credentials in t25.yaml.

t25.yaml is meant to be committed and shared, so T25 never reads a secret from it:
agent CLIs run with the user's own login, the remote-worker credential comes from
FACTORY_WORKER_CREDENTIAL and a database password from T25_DATABASE_URL. This scan
runs before schema validation, so a key pasted in the wrong place is refused with a
pointer to where it belongs instead of being reported as a mere unknown key. The
message names the file, line and key, never the secret itself.
"""

from __future__ import annotations

import itertools
import re

import yaml

from core.config.source import ConfigSource, Loc, walk_nodes

PROVIDER = (
    "the agent CLI's own login or its environment variable (e.g. ANTHROPIC_API_KEY, "
    "OPENAI_API_KEY, GEMINI_API_KEY); T25 never stores provider keys"
)
WORKER = "the FACTORY_WORKER_CREDENTIAL environment variable"
DATABASE = "the T25_DATABASE_URL environment variable (the whole URL, password included)"
ELSEWHERE = "an environment variable read by the tool that needs it; T25 never stores secrets"

_HINT = "remove it from the file, and rotate it if the file was ever committed or shared"

_NOT_BEFORE = r"(?<![A-Za-z0-9])"

# What a value looks like -> (what it is, where it belongs).
_SHAPES: list[tuple[re.Pattern[str], str, str]] = [
    (re.compile(_NOT_BEFORE + r"sk-ant-[A-Za-z0-9_-]{8,}"), "an Anthropic API key", PROVIDER),
    (re.compile(_NOT_BEFORE + r"sk-[A-Za-z0-9_-]{16,}"), "an API key", PROVIDER),
    (re.compile(_NOT_BEFORE + r"AIza[0-9A-Za-z_-]{35}"), "a Google API key", PROVIDER),
    (
        re.compile(_NOT_BEFORE + r"(?:gh[pousr]_[A-Za-z0-9]{16,}|github_pat_[A-Za-z0-9_]{16,})"),
        "a GitHub token",
        "the gh CLI's own login or the GH_TOKEN environment variable",
    ),
    (
        re.compile(_NOT_BEFORE + r"glpat-[A-Za-z0-9_-]{16,}"),
        "a GitLab token",
        "glab's own login or the GITLAB_TOKEN environment variable",
    ),
    (re.compile(_NOT_BEFORE + r"xox[bpas]-[A-Za-z0-9-]{10,}"), "a Slack token", ELSEWHERE),
    (
        re.compile(_NOT_BEFORE + r"AKIA[0-9A-Z]{16}"),
        "an AWS access key",
        "your AWS profile or the AWS_ACCESS_KEY_ID environment variable",
    ),
    (re.compile(r"(?i)\bbearer\s+[A-Za-z0-9._~+/=-]{8,}"), "a bearer token", ELSEWHERE),
]
_URL_WITH_PASSWORD = re.compile(r"[A-Za-z][A-Za-z0-9+.-]*://[^/\s:@]+:[^/\s@]+@")

# Key names that hold secrets, matched against the key's words (`worker_credential`
# -> worker, credential) so that e.g. `max_tokens` is not mistaken for `token`.
_SECRET_WORDS = {"token", "password", "passwd", "secret", "credential", "credentials", "apikey"}
_SECRET_PAIRS = {("api", "key"), ("access", "key"), ("private", "key")}


def refuse_credentials(source: ConfigSource) -> None:
    """Raise ConfigError at the first key or value that looks like a credential."""
    if source.node is None:
        return
    for loc, node in walk_nodes(source.node):
        if isinstance(node, yaml.MappingNode):
            for key, _ in node.value:
                if isinstance(key, yaml.ScalarNode):
                    _check_key(source, loc, key.value)
        elif isinstance(node, yaml.ScalarNode) and isinstance(node.value, str):
            found = _credential_in(node.value, loc)
            if found:
                what, where = found
                raise source.error(loc, _refusal(f"looks like {what}", where), hint=_HINT)


def _check_key(source: ConfigSource, parent: Loc, key: str) -> None:
    found = _credential_in(key, parent)
    if found:  # the key itself is a secret: do not print it, point at its parent
        what, where = found
        raise source.error(
            parent, _refusal(f"holds a key that looks like {what}", where), hint=_HINT
        )
    if _is_secret_name(key):
        loc = (*parent, key)
        raise source.error(
            loc, _refusal("is named like a secret", _pointer_for_name(loc)), hint=_HINT
        )


def _credential_in(text: str, loc: Loc) -> tuple[str, str] | None:
    if _URL_WITH_PASSWORD.search(text):
        in_store = bool(loc) and loc[0] == "store"
        return "a URL with a password", DATABASE if in_store else ELSEWHERE
    for pattern, what, where in _SHAPES:
        if pattern.search(text):
            return what, _worker_pointer(loc) or where
    return None


def _is_secret_name(key: str) -> bool:
    words = [w for w in re.split(r"[^a-z0-9]+", key.lower()) if w]
    if any(w in _SECRET_WORDS for w in words):
        return True
    return (
        any(pair in _SECRET_PAIRS for pair in itertools.pairwise(words)) or "apikey" in key.lower()
    )


def _pointer_for_name(loc: Loc) -> str:
    words = " ".join(str(part).lower() for part in loc)
    if "passw" in words or (loc and loc[0] == "store"):
        return DATABASE
    if worker := _worker_pointer(loc):
        return worker
    if "token" in words or "secret" in words:
        return ELSEWHERE
    return PROVIDER


def _worker_pointer(loc: Loc) -> str | None:
    words = " ".join(str(part).lower() for part in loc)
    if (loc and loc[0] == "serve") or "worker" in words or "credential" in words:
        return WORKER
    return None


def _refusal(what: str, where: str) -> str:
    return f"{what}; secrets never go in t25.yaml: use {where}"
