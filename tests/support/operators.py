"""The operator's credential in tests: every serve needs one, on loopback too
(t25_tui.api.credentials). A test talks to a serve as the host's own operator, with the token
that serve made in its checkout's `.factory/operator-token`."""

from __future__ import annotations

from pathlib import Path

from t25_tui.api.credentials import local_operator, local_token


def operator_headers(root: Path) -> dict[str, str]:
    """The header that makes a request the host's own operator's, for the serve of `root`."""
    return {"Authorization": f"Bearer {local_token(root)}"}


def operator_name() -> str:
    """Who the host's own operator is, as the audit records them."""
    return local_operator()
