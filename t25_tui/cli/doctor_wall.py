"""What `t25 doctor` says of the wall around runs on this machine, as configured: what the
sandbox probe saw from inside (capabilities, a mount, a network namespace), what each role's
runs may reach, how their resources are capped, and the sandbox table of docs/guides/security.md - attack by
attack - with this machine's verdict in each row.

    wall_report(config) -> shapes.WallReport
    render_wall(report) -> lines
"""

from __future__ import annotations

import os

from core.config.schema import Config
from t25_tui.cli.shapes import Reach, WallReport, WallVerdict


def wall_report(config: Config) -> WallReport:
    from adapters.caps import backend
    from adapters.sandbox import probe, unconfined_reason

    seen = probe()
    caps = backend()
    mode, network = config.sandbox.mode, str(config.sandbox.network)
    confined = unconfined_reason(mode) is None and seen.problem is None
    if confined and network != "shared" and not seen.own_network:
        network = "shared (no network namespace here)"
    return WallReport(
        probe=seen.summary(),
        root=os.geteuid() == 0,
        network=network if confined else "shared (unconfined)",
        qa_network=config.qa.network if confined else "shared (unconfined)",
        reach=_reach(config),
        caps=caps.describe(),
        verdicts=_verdicts(config, confined, network, caps.kind),
    )


def _reach(config: Config) -> list[Reach]:
    """Each role's CLIs, and what their runs may reach under the allowlist."""
    from adapters.process import passthrough_env
    from adapters.registry import builtin_specs
    from core.config.config_section import ROLES

    specs = {spec.name: spec for spec in builtin_specs()}
    out = []
    for role in ROLES:
        for profile in config.roles.chain(role) or []:
            spec = specs.get(profile.adapter)
            env = passthrough_env((*spec.login_env, *profile.env_passthrough)) if spec else {}
            model = spec.model_hosts(env, profile.args) if spec else []
            out.append(
                Reach(
                    role=role,
                    adapter=profile.adapter,
                    hosts=list(dict.fromkeys([*model, *config.sandbox.hosts_for(role)])),
                )
            )
    return out


def _verdicts(config: Config, confined: bool, network: str, caps: str) -> list[WallVerdict]:
    """The sandbox table of docs/guides/security.md, each row with what holds here and now."""
    root = os.geteuid() == 0
    rows = []

    def row(attack: str, verdict: str) -> None:
        rows.append(WallVerdict(attack=attack, verdict=verdict))

    if confined:
        row("write the main checkout, .git or T25's state", "refused (read-only, hidden)")
        row("remount the host read-write (as root)", "refused (no capability)")
        row("read the operator's credentials in HOME", "refused (homes hidden)")
        row("read T25's environment in /proc", "refused (own PID namespace)")
        row("leave a process running after the run", "refused (killed with its namespace)")
        loopback = "open" if network.startswith("shared") else "refused (own network)"
        outside = {"allowlist": "only the allowlist (proxy)", "none": "refused"}.get(
            network, "open"
        )
        row("reach loopback services (Postgres, t25 serve)", loopback)
        row("reach the internet", outside)
    else:
        row("write the main checkout, .git or T25's state", "undone after the run (not .factory/)")
        row("remount the host read-write (as root)", "open (unconfined)")
        row("read the operator's credentials in HOME", "open (unconfined)")
        row("read T25's environment in /proc", "refused (secrets held out of it)")
        row("leave a process running after the run", "killed by the reaper")
        row("reach loopback services (Postgres, t25 serve)", "open (unconfined)")
        row("reach the internet", "open (unconfined)")
    memory = "capped per run" if caps != "rlimit" else "capped per process"
    processes = (
        "capped per run"
        if caps != "rlimit"
        else ("NOT capped (root without a cgroup)" if root else "capped per user")
    )
    row("take the machine's memory", memory)
    row("fork without end", processes)
    row("spin the CPU", "capped per process (limits.run_cpu_s)")
    row("commit a huge file", f"refused over {config.limits.max_file_bytes:,} bytes")
    return rows


def render_wall(report: WallReport) -> list[str]:
    who = "root" if report.root else "an unprivileged user"
    lines = [
        f"sandbox probe (as {who}): {report.probe}",
        f"network: agents {report.network}; QA checks {report.qa_network}",
    ]
    if report.network == "allowlist":
        for reach in report.reach:
            hosts = ", ".join(reach.hosts) or "nothing"
            lines.append(f"  {reach.role:<9} {reach.adapter:<9} may reach {hosts}")
    lines.append(f"resource caps: {report.caps}")
    width = max(len(v.attack) for v in report.verdicts)
    lines.append("what a hostile agent gets here:")
    lines += [f"  {v.attack:<{width}}  {v.verdict}" for v in report.verdicts]
    return lines
