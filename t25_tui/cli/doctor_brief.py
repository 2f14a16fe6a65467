"""`t25 doctor` as a person reads it first: what is wrong at the top, then one ✓ or ✗ line per
thing checked, every line within 100 columns. The wide tables (each CLI's capabilities and
flags, each role's network reach and tools) are behind `--verbose`."""

from __future__ import annotations

import textwrap

from t25_tui.cli.doctor_requests import REQUESTS_HEADING, request_line
from t25_tui.cli.shapes import AdapterCheck, DoctorReport, RoleCheck

WIDTH = 100
OK, BAD = "✓", "✗"


def render_brief(report: DoctorReport) -> list[str]:
    """Problems first, then git, bubblewrap, the store, each agent CLI and each role."""
    lines = _wrapped(head(report), "", "  ")
    lines.append("")
    if report.problems:
        count = len(report.problems)
        lines.append(f"{BAD} {count} problem{'s' if count > 1 else ''}:")
        for problem in report.problems:
            lines += _wrapped(problem, f"  {BAD} ", "    ")
    else:
        lines.append(f"{OK} problems: none; T25 can work as configured")
    lines += ["", "checked:"]
    git, bwrap, store = report.git, report.bubblewrap, report.store
    lines += _wrapped(
        f"git {git.version} ({git.path})" if git.ok else f"git: {git.problem}", _mark(git.ok)
    )
    lines += _wrapped(
        f"bubblewrap {bwrap.version or ''} ({bwrap.path}), usable"
        if bwrap.ok
        else f"bubblewrap: not usable: {bwrap.problem}",
        _mark(bwrap.ok or report.sandbox.startswith("sandbox: none")),
    )
    lines += _wrapped(
        f"store {store.url}"
        + ("" if store.reachable is None else " reachable" if store.reachable else " UNREACHABLE"),
        _mark(store.reachable is not False),
    )
    lines += _wrapped(report.sandbox, "  ")
    lines += ["", "agent CLIs:"]
    lines += [line for a in report.adapters for line in _wrapped(_adapter(a), _mark(_fine(a)))]
    lines += ["", "roles:"]
    lines += [line for r in report.roles for line in _wrapped(_role(r), _mark(bool(r.plays)))]
    if report.requests:
        lines += ["", REQUESTS_HEADING]
        lines += [line for r in report.requests for line in _wrapped(request_line(r), "  ", "    ")]
    lines += ["", "`t25 doctor --verbose`: every CLI's capabilities and flags, reach and tools"]
    return lines


def _mark(ok: bool) -> str:
    return f"  {OK} " if ok else f"  {BAD} "


def _wrapped(text: str, first: str, rest: str | None = None) -> list[str]:
    """`text` after `first`, wrapped at 100 columns; long words (paths) are broken too."""
    return textwrap.wrap(
        text,
        WIDTH,
        initial_indent=first,
        subsequent_indent=rest or " " * len(first),
        break_on_hyphens=False,
    ) or [first.rstrip()]


def _fine(a: AdapterCheck) -> bool:
    return bool(a.known and a.path and a.supported) and (
        a.login is None or a.login.state not in ("no", "unknown")
    )


def _adapter(a: AdapterCheck) -> str:
    if not a.known:
        return f"{a.name}: no such adapter"
    if not a.path:
        return f"{a.name}: not found on PATH" + (
            f" (found at {a.elsewhere})" if a.elsewhere else ""
        )
    version = a.version or "version unknown"
    supported = "" if a.supported else ", version not supported"
    login = ""
    if a.login is not None:
        login = f", login: {a.login.state}" + (f" ({a.login.by})" if a.login.by else "")
    return f"{a.name} {version}{supported}{login}"


def _role(r: RoleCheck) -> str:
    project = f"project {r.project}: " if r.project else ""
    plays = f"plays: {r.plays}" if r.plays else "NO USABLE ADAPTER"
    return f"{project}{r.role:<9} {' -> '.join(r.chain)}  {plays}"


def head(report: DoctorReport) -> str:
    """The first line: which t25.yaml was checked, or why the roles `t25 init` would write."""
    config = report.config
    if not config.found:
        return (
            "t25 doctor: no t25.yaml here yet (hint: `t25 init` writes one), so this checks "
            "the roles it would configure"
        )
    if config.error:
        return f"t25 doctor: {config.error}; below, the roles `t25 init` would configure"
    return f"t25 doctor: {config.path}"
