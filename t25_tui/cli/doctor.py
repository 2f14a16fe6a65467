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
from collections.abc import Mapping
from pathlib import Path
from typing import TYPE_CHECKING

from core.config.schema import ROLES, AgentProfile, Config
from core.config.source import did_you_mean
from core.domain.text import printable

if TYPE_CHECKING:
    from adapters.base import CliAdapterSpec
    from core.ports import AgentAdapter


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
        "  ".join(cell.ljust(width) for cell, width in zip(row, widths, strict=True)).rstrip()
        for row in rows
    ]
    out.insert(1, "  ".join("-" * width for width in widths))
    return out


# The adapter table's columns, one row per adapter the configuration names.
COLUMNS = [
    "adapter",
    "found",
    "version",
    "supported",
    "output",
    "usage",
    "cost",
    "resume",
    "sandbox flags",
    "later stages",  # how QA, review, security and docs runs skip the tree's own settings
]


async def diagnose(config: Config) -> tuple[list[str], bool]:
    """The report's lines, and whether every configured role has a usable adapter."""
    from adapters.registry import builtin_adapters

    adapters = builtin_adapters()
    chains = _chains(config)
    own = {p.name: _chains(config.for_project(p.name)) for p in config.projects if p.roles}
    every = [chain for found in (chains, *own.values()) for chain in found.values()]
    used = list(dict.fromkeys(p.adapter for chain in every for p in chain))
    versions = await _versions(adapters, used)

    rows, problems = [COLUMNS], []
    for name in used:
        row, found = _adapter_row(name, adapters, versions.get(name))
        rows.append(row)
        problems += found

    sandboxes = _Sandboxes(config)
    roles: list[str] = []
    all_ok = True
    for role, chain in chains.items():
        usable, found = await _usable(role, chain, adapters, sandboxes)
        problems += found
        all_ok &= usable is not None
        roles.append(_role_line(role, chain, usable))
    problems += _self_review(config, chains)
    for project in config.projects:
        overrides = project.overrides()
        if not overrides:
            continue
        roles += [f"  project {project.name}, in place of the above: {'; '.join(overrides)}"]
        named = project.roles.model_fields_set if project.roles else set()
        for role, chain in own.get(project.name, {}).items():
            if role not in named:  # the top-level chain, checked above
                continue
            usable, found = await _usable(role, chain, adapters, sandboxes)
            problems += [f"project {project.name}: {p}" for p in found]
            all_ok &= usable is not None
            roles.append("  " + _role_line(role, chain, usable))
    return _report(config, rows, roles, problems), all_ok


def _self_review(config: Config, chains: Mapping[str, list[AgentProfile]]) -> list[str]:
    """A review role whose every profile could be the author of what a dev profile writes
    (policies.reviewer_differs_from_author): its reviews would wait in NEEDS_INPUT."""
    from core.domain.models import Author
    from core.worker.selection import not_the_authors

    rule = config.policies.reviewer_differs_from_author
    out = []
    for role in ("reviewer", "security"):
        for dev in chains.get("dev", []) if role in chains else []:
            # A profile naming no model runs its CLI's default, which no reviewer names.
            author = Author(adapter=dev.adapter, models=(dev.model or "(the CLI's default)",))
            if not not_the_authors(chains[role], [author], rule)[0]:
                name = dev.adapter + (f" ({dev.model})" if dev.model else "")
                out.append(
                    f"roles.{role}: no profile differs from what dev's {name} writes "
                    f"(policies.reviewer_differs_from_author: {rule}); its reviews will wait "
                    f"in NEEDS_INPUT: add a profile with another "
                    f"{'adapter' if rule == 'adapter' else 'model'} to roles.{role}"
                )
                break
    return out


def _chains(config: Config) -> dict[str, list[AgentProfile]]:
    """Every configured role's fallback chain, in pipeline order."""
    return {role: chain for role in ROLES if (chain := config.roles.chain(role))}


async def _versions(adapters: Mapping[str, AgentAdapter], used: list[str]) -> dict[str, str | None]:
    """The version of each used adapter T25 ships, all read at once."""
    known = [name for name in used if name in adapters]
    versions = await asyncio.gather(*(adapters[name].version() for name in known))
    return dict(zip(known, versions, strict=True))


def _adapter_row(
    name: str, adapters: Mapping[str, AgentAdapter], version: str | None
) -> tuple[list[str], list[str]]:
    """One adapter's row of the table, and what is wrong with it."""
    from adapters.base import CliAdapter

    adapter = adapters.get(name)
    if not isinstance(adapter, CliAdapter):
        known = sorted(adapters)
        return [name, *["-"] * (len(COLUMNS) - 1)], [
            f"{name}: no such adapter (known: {', '.join(known)})" + did_you_mean(name, known)
        ]
    spec, path = adapter.spec, adapter.locate()
    supported, note = spec.check_version(version) if path else (False, "not installed")
    newer = "newer" in note
    row = [
        name,
        path or "no",
        version or "-",
        _yes(supported) + (" (newer)" if newer else ""),
        *_capabilities(spec),
    ]
    if path is None:
        return row, [f"{name}: `{spec.binary}` not found on PATH"]
    if not supported or newer:
        return row, [f"{name}: {note}"]
    return row, []


def _capabilities(spec: CliAdapterSpec) -> list[str]:
    """The table's last six cells: what the CLI can do headless."""
    caps = spec.capabilities
    return [
        caps.structured_output,
        _yes(caps.usage),
        _yes(caps.cost),
        caps.resume,
        caps.sandbox_flags,
        caps.project_config_off,
    ]


def _yes(flag: bool) -> str:
    return "yes" if flag else "no"


async def _usable(
    role: str,
    chain: list[AgentProfile],
    adapters: Mapping[str, AgentAdapter],
    sandboxes: _Sandboxes,
) -> tuple[str | None, list[str]]:
    """The adapter that would play `role` (the first installed one whose sandbox can be
    had), or None; and what is wrong with each profile of its chain."""
    from adapters.base import CliAdapter

    usable = None
    problems: list[str] = []
    for index, profile in enumerate(chain):
        where = f"roles.{role}[{index}] ({profile.adapter})"
        adapter = adapters.get(profile.adapter)
        spec = adapter.spec if isinstance(adapter, CliAdapter) else None
        problems += [f"{where}: {p}" for p in _profile_problems(profile, spec)]
        sandbox = await sandboxes.problem(profile)
        if sandbox:
            kind = sandboxes.config.sandbox.for_profile(profile)
            problems.append(f"{where}: sandbox {kind}: {sandbox}")
        elif usable is None and adapter is not None and adapter.locate():
            usable = profile.adapter
    return usable, problems


def _profile_problems(profile: AgentProfile, spec: CliAdapterSpec | None) -> list[str]:
    """What looks wrong in one profile, before its sandbox is tried."""
    problems = spec.config_problems(profile.model, list(profile.args)) if spec else []
    problems += [
        f"env_passthrough {env} is not set here"
        for env in profile.env_passthrough
        if env not in os.environ
    ]
    problems += _hidden_login(profile, spec)
    return problems


def _hidden_login(profile: AgentProfile, spec: CliAdapterSpec | None) -> list[str]:
    """A private HOME hides the CLI's own login: then a key or token must come from the
    environment, and none of the ones it reads is set."""
    if not profile.private_home or spec is None:
        return []
    logins = [v for v in (*spec.login_env, *profile.env_passthrough) if "KEY" in v or "TOKEN" in v]
    if not logins or any(v in os.environ for v in logins):
        return []
    return [f"private_home hides the login in your HOME and none of {', '.join(logins)} is set"]


class _Sandboxes:
    """Whether each sandbox the profiles ask for can be had here, tried once per kind."""

    def __init__(self, config: Config) -> None:
        self.config = config
        self._problems: dict[tuple[str, str | None], str | None] = {}

    async def problem(self, profile: AgentProfile) -> str | None:
        """Why the profile's sandbox cannot be had, or None when it can."""
        from adapters.sandbox import SandboxUnavailable, sandbox_for

        kind = self.config.sandbox.for_profile(profile)
        key = (kind, profile.sandbox_image)
        if key not in self._problems:
            try:
                await sandbox_for(kind, image=profile.sandbox_image).check()
                self._problems[key] = None
            except SandboxUnavailable as exc:
                self._problems[key] = str(exc)
        return self._problems[key]


def sandbox_line(config: Config) -> str:
    from adapters.sandbox import describe

    return describe(config.sandbox.mode, config.sandbox.network)


def _role_line(role: str, chain: list[AgentProfile], usable: str | None) -> str:
    chain_text = " -> ".join(p.adapter for p in chain)
    return f"  {role:<9} {chain_text:<30} {'plays: ' + usable if usable else 'NO USABLE ADAPTER'}"


def _report(
    config: Config, rows: list[list[str]], roles: list[str], problems: list[str]
) -> list[str]:
    lines = [f"t25 doctor: {config.path}", sandbox_line(config), "", *_table(rows)]
    lines += ["", "roles:", *roles, ""]
    if not problems:
        return [*lines, "problems: none"]
    return [*lines, "problems:", *(f"  - {p}" for p in dict.fromkeys(problems))]
