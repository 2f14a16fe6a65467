"""`t25 doctor`: every configured agent CLI - found or not, its version against the supported
range, what it can do headless - and what looks wrong in the profiles that use it.

Exits 1 when some configured role has no usable adapter (none found, or every one of its
profiles asks for a sandbox that cannot be had), so a script can gate on it. Before
`t25 init` it checks the roles of the t25.yaml that `t25 init` would write, so the agent
CLIs can be checked first. An unknown adapter name is one problem among the others here;
every other command refuses the file for it.
"""

from __future__ import annotations

import argparse
import asyncio
import os
from pathlib import Path

from core.config.schema import ROLES, Config
from core.config.source import did_you_mean
from core.domain.text import printable


def doctor(args: argparse.Namespace) -> int:
    config, note = _config(args)
    lines, ok = asyncio.run(diagnose(config))
    if note:
        lines[0] = f"t25 doctor: {note}"
    print("\n".join(printable(line) for line in lines))  # names come from the file
    return 0 if ok else 1


def _config(args: argparse.Namespace) -> tuple[Config, str | None]:
    """The t25.yaml in use; before `t25 init`, the one it would write, so the agent CLIs
    can be checked before anything is set up."""
    from core.config.schema import CONFIG_FILENAME, default_config_text, find_config, parse_config
    from core.errors import ConfigError
    from t25_tui.cli.context import config_of

    if not args.config:
        try:
            find_config(Path.cwd())
        except ConfigError:
            example = parse_config(default_config_text(), Path.cwd() / CONFIG_FILENAME)
            return example, (
                f"no {CONFIG_FILENAME} here yet, so this checks the roles "
                "`t25 init` would configure"
            )
    return config_of(args, any_adapter=True), None


def _table(rows: list[list[str]]) -> list[str]:
    widths = [max(len(row[i]) for row in rows) for i in range(len(rows[0]))]
    out = [
        "  ".join(cell.ljust(width) for cell, width in zip(row, widths)).rstrip() for row in rows
    ]
    out.insert(1, "  ".join("-" * width for width in widths))
    return out


async def diagnose(config: Config) -> tuple[list[str], bool]:
    """The report's lines, and whether every configured role has a usable adapter."""
    from adapters.base import CliAdapter
    from adapters.registry import builtin_adapters
    from adapters.sandbox import SandboxUnavailable, sandbox_for

    adapters = builtin_adapters()
    chains = {role: config.roles.chain(role) for role in ROLES}
    chains = {role: chain for role, chain in chains.items() if chain}
    used = list(dict.fromkeys(p.adapter for chain in chains.values() for p in chain))
    known = [name for name in used if name in adapters]
    versions = await asyncio.gather(*(adapters[name].version() for name in known))
    version_of = dict(zip(known, versions))

    rows = [
        [
            "adapter",
            "found",
            "version",
            "supported",
            "output",
            "usage",
            "cost",
            "resume",
            "sandbox flags",
        ]
    ]
    problems: list[str] = []
    for name in used:
        adapter = adapters.get(name)
        if not isinstance(adapter, CliAdapter):
            rows.append([name, "-", "-", "-", "-", "-", "-", "-", "-"])
            known = sorted(adapters)
            problems.append(
                f"{name}: no such adapter (known: {', '.join(known)})" + did_you_mean(name, known)
            )
            continue
        spec, path, version = adapter.spec, adapter.locate(), version_of.get(name)
        supported, note = spec.check_version(version) if path else (False, "not installed")
        caps = spec.capabilities
        rows.append(
            [
                name,
                path or "no",
                version or "-",
                ("yes" if supported else "no") + (" (newer)" if "newer" in note else ""),
                caps.structured_output,
                "yes" if caps.usage else "no",
                "yes" if caps.cost else "no",
                caps.resume,
                caps.sandbox_flags,
            ]
        )
        if path is None:
            problems.append(f"{name}: `{spec.binary}` not found on PATH")
        elif not supported or "newer" in note:
            problems.append(f"{name}: {note}")

    sandboxes: dict[tuple[str, str | None], str | None] = {}
    roles_out: list[str] = []
    all_ok = True
    for role, chain in chains.items():
        usable = None
        for index, profile in enumerate(chain):
            where = f"roles.{role}[{index}] ({profile.adapter})"
            adapter = adapters.get(profile.adapter)
            spec = adapter.spec if isinstance(adapter, CliAdapter) else None
            if spec is not None:
                problems += [
                    f"{where}: {p}" for p in spec.config_problems(profile.model, list(profile.args))
                ]
            for env in profile.env_passthrough:
                if env not in os.environ:
                    problems.append(f"{where}: env_passthrough {env} is not set here")
            if profile.private_home and spec is not None:
                logins = [
                    v
                    for v in (*spec.login_env, *profile.env_passthrough)
                    if "KEY" in v or "TOKEN" in v
                ]
                if logins and not any(v in os.environ for v in logins):
                    problems.append(
                        f"{where}: private_home hides the login in your HOME and "
                        f"none of {', '.join(logins)} is set"
                    )
            if profile.sandbox != "none" and not profile.private_home:
                problems.append(
                    f"{where}: sandbox {profile.sandbox} without private_home: "
                    "your HOME is read-only inside, and most CLIs write to it"
                )
            key = (profile.sandbox, profile.sandbox_image)
            if key not in sandboxes:
                try:
                    await sandbox_for(profile.sandbox, image=profile.sandbox_image).check()
                    sandboxes[key] = None
                except SandboxUnavailable as exc:
                    sandboxes[key] = str(exc)
            if sandboxes[key]:
                problems.append(f"{where}: sandbox {profile.sandbox}: {sandboxes[key]}")
            elif usable is None and adapter is not None and adapter.locate():
                usable = profile.adapter
        all_ok &= usable is not None
        chain_text = " -> ".join(p.adapter for p in chain)
        roles_out.append(
            f"  {role:<9} {chain_text:<30} {'plays: ' + usable if usable else 'NO USABLE ADAPTER'}"
        )

    lines = [f"t25 doctor: {config.path}", "", *_table(rows), "", "roles:", *roles_out, ""]
    lines += (
        ["problems:", *(f"  - {p}" for p in dict.fromkeys(problems))]
        if problems
        else ["problems: none"]
    )
    return lines, all_ok
