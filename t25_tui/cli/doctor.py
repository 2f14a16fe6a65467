"""`t25 doctor`: every configured agent CLI - found or not, its version against the supported
range, what it can do headless, whether it is logged in - and what looks wrong in the
profiles that use it; git, bubblewrap and the store beside them (`doctor_checks`).

Exits 1 when T25 could not work as configured: a role has no usable adapter (none found, or
every one of its profiles asks for a sandbox that cannot be had), or the CLI that would
play it is not logged in; t25.yaml has an error; git is missing or too old; a Postgres
store does not answer; a project's default branch has no commit here, or its repository
keeps files in Git LFS and git-lfs is not on PATH (`doctor_repos`). A script can gate on it, or read `--json` (`shapes.DoctorReport`).
Before `t25 init`, or when t25.yaml has an error, it checks the roles of the t25.yaml that
`t25 init` would write (and lists every CLI T25 ships), so the agent CLIs can be checked
first. An unknown adapter name is one problem among the others here; every other command
refuses the file for it.
"""

from __future__ import annotations

import argparse
import asyncio
import dataclasses
import os
import shlex
from collections.abc import Mapping
from pathlib import Path
from typing import TYPE_CHECKING

from adapters.login import Login, LoginState, check_login, key_variables
from core.config.config_section import ROLES
from core.config.schema import AgentProfile, Config
from core.config.source import did_you_mean
from core.domain.text import printable
from t25_tui.cli.doctor_brief import head, render_brief
from t25_tui.cli.doctor_checks import bubblewrap_check, elsewhere, git_check, store_check
from t25_tui.cli.doctor_repos import repository_problems
from t25_tui.cli.doctor_requests import REQUESTS_HEADING, request_costs, request_line
from t25_tui.cli.doctor_wall import render_wall, wall_report
from t25_tui.cli.shapes import (
    AdapterCheck,
    ConfigCheck,
    DoctorReport,
    LoginJson,
    ProjectOverrides,
    RoleCheck,
    ToolMapping,
)

if TYPE_CHECKING:
    from adapters.base import CliAdapterSpec
    from core.ports import AgentAdapter


def doctor(args: argparse.Namespace) -> int:
    report = asyncio.run(examine(args))
    if args.json:
        print(report.text())
    else:
        lines = render(report) if args.verbose else render_brief(report)
        print("\n".join(printable(line) for line in lines))  # names come from the file
    return 0 if report.ok else 1


async def examine(args: argparse.Namespace) -> DoctorReport:
    """Everything the doctor checks, at once: the configuration, git, bubblewrap, the
    store, and each agent CLI (found, version, login)."""
    config, check = _config(args)
    git, bubblewrap, store, (adapters, roles, problems, playable), repos = await asyncio.gather(
        git_check(),
        bubblewrap_check(),
        store_check(config.store_url),
        _agents(config, every_cli=not check.found),
        repository_problems(config) if check.found and not check.error else _nothing(),
    )
    problems = [
        *([check.error] if check.error else []),
        *(tool.problem for tool in (git, store) if tool.problem),
        *repos,
        *problems,
        *filter(None, [await _open_door(config.store_url)]),
    ]
    ok = playable and check.error is None and git.ok and store.reachable is not False and not repos
    return DoctorReport(
        ok=ok,
        config=check,
        sandbox=sandbox_line(config),
        wall=await asyncio.to_thread(wall_report, config),
        git=git,
        bubblewrap=bubblewrap,
        store=store,
        adapters=adapters,
        roles=roles,
        tools=tool_mappings(config),
        requests=request_costs(config),
        projects=[
            ProjectOverrides(name=p.name, overrides=p.overrides())
            for p in config.projects
            if p.overrides()
        ],
        problems=list(dict.fromkeys(problems)),
    )


async def _nothing() -> list[str]:
    return []


async def _open_door(url: str) -> str | None:
    from store.open_door import accepts_without_password

    return await accepts_without_password(url)


def _config(args: argparse.Namespace) -> tuple[Config, ConfigCheck]:
    """The t25.yaml in use. Before `t25 init`, or when the file has an error, the one
    `t25 init` would write stands in, so the agent CLIs can still be checked."""
    from core.config.schema import CONFIG_FILENAME, default_config_text, find_config, parse_config
    from core.errors import ConfigError
    from t25_tui.cli.context import config_of
    from t25_tui.cli.setup import installed_clis, with_roles

    example = parse_config(
        with_roles(default_config_text(), installed_clis()), Path.cwd() / CONFIG_FILENAME
    )
    if not args.config:
        try:
            find_config(Path.cwd())
        except ConfigError:
            return example, ConfigCheck(path=None, found=False, error=None)
    try:
        config = config_of(args, any_adapter=True)
    except ConfigError as exc:
        return example, ConfigCheck(path=args.config, found=True, error=exc.message)
    return config, ConfigCheck(path=str(config.path), found=True, error=None)


async def _agents(
    config: Config, *, every_cli: bool
) -> tuple[list[AdapterCheck], list[RoleCheck], list[str], bool]:
    """Each adapter the roles name (with `every_cli`, every CLI T25 ships as well), each
    role's chain and player, what is wrong, and whether every role has a player that can
    run: found, its sandbox to be had, and not logged out."""
    from adapters.registry import BUILTIN_NAMES, OWN_AGENT, builtin_adapters

    adapters = builtin_adapters()
    chains = _chains(config)
    own = {p.name: _chains(config.for_project(p.name)) for p in config.projects if p.roles}
    every = [chain for found in (chains, *own.values()) for chain in found.values()]
    used = list(dict.fromkeys(p.adapter for chain in every for p in chain))
    extra = [n for n in BUILTIN_NAMES if every_cli and n not in used and n != OWN_AGENT]
    names = [*used, *extra]
    roots = [config.root, Path.cwd()]
    found = await asyncio.gather(*(_adapter_check(n, adapters, roots) for n in names))
    checks = [check for check, _ in found]
    problems = [
        p for name, (_, wrong) in zip(names, found, strict=True) if name in used for p in wrong
    ]
    logged_out = {c.name for c in checks if c.login and c.login.state == LoginState.NO.value}

    sandboxes = _Sandboxes(config)
    roles: list[RoleCheck] = []
    playable = True
    chains_by_project: list[tuple[str | None, dict[str, list[AgentProfile]], set[str]]]
    chains_by_project = [(None, chains, set(chains))]
    for project in config.projects:
        named = project.roles.model_fields_set if project.roles else set()
        chains_by_project.append((project.name, own.get(project.name, {}), named))
    for project_name, project_chains, named in chains_by_project:
        for role, chain in project_chains.items():
            if role not in named:  # the top-level chain, checked above
                continue
            usable, wrong = await _usable(role, chain, adapters, sandboxes)
            where = f"project {project_name}: " if project_name else ""
            problems += [where + p for p in wrong]
            playable &= usable is not None and usable not in logged_out
            chain_names = [p.adapter for p in chain]
            roles.append(
                RoleCheck(role=role, project=project_name, chain=chain_names, plays=usable)
            )
    problems += _self_review(config, chains)
    return checks, roles, problems, playable


async def _adapter_check(
    name: str, adapters: Mapping[str, AgentAdapter], roots: list[Path]
) -> tuple[AdapterCheck, list[str]]:
    """One adapter: found, version, capabilities, login; and what is wrong with it."""
    from adapters.base import CliAdapter

    adapter = adapters.get(name)
    if not isinstance(adapter, CliAdapter):
        known = sorted(adapters)
        unknown = AdapterCheck(
            name=name, known=False, path=None, elsewhere=None, version=None,
            supported=False, newer_than_tested=False, capabilities=None, login=None,
        )  # fmt: skip
        problem = f"{name}: no such adapter (known: {', '.join(known)})" + did_you_mean(name, known)
        return unknown, [problem]
    spec, path = adapter.spec, adapter.locate()
    version, login = await asyncio.gather(adapter.version(), check_login(spec, path))
    supported, note = spec.check_version(version) if path else (False, "not installed")
    off_path = None if path else elsewhere(spec.binary, roots, spec.install_dirs)
    check = AdapterCheck(
        name=name,
        known=True,
        path=path,
        elsewhere=str(off_path) if off_path else None,
        version=version,
        supported=supported,
        newer_than_tested="newer" in note,
        capabilities=dataclasses.asdict(spec.capabilities),
        login=LoginJson(state=login.state.value, by=login.by),
    )
    return check, _adapter_problems(check, spec, note, login)


def _adapter_problems(
    check: AdapterCheck, spec: CliAdapterSpec, note: str, login: Login
) -> list[str]:
    name = spec.name
    if check.path is None:
        off_path = Path(check.elsewhere) if check.elsewhere else None
        found = f" (found {off_path}: add {off_path.parent} to PATH)" if off_path else ""
        return [f"{name}: `{spec.binary}` not found on PATH{found}"]
    problems = [f"{name}: {note}"] if not check.supported or "newer" in note else []
    if login.state is LoginState.NO:
        keys = key_variables(spec)
        how = spec.login_probe.log_in if spec.login_probe else "the CLI"
        alternative = f", or set {' or '.join(keys)}" if keys else ""
        problems.append(f"{name}: not logged in ({login.by}): log in with `{how}`{alternative}")
    elif login.state is LoginState.UNKNOWN:
        problems.append(f"{name}: login unknown: {login.by}")
    return problems


def tool_mappings(config: Config) -> list[ToolMapping]:
    """For each role (and each project's own chain), what every CLI of its chain is given
    for the role's tool set: the flags and variables its adapter spec maps the set onto."""
    from adapters.registry import builtin_specs
    from core.domain.tools import ordered, tools_for

    specs = {spec.name: spec for spec in builtin_specs()}
    chains: list[tuple[str | None, str, list[AgentProfile]]] = [
        (None, role, chain) for role, chain in _chains(config).items()
    ]
    for project in config.projects:
        named = project.roles.model_fields_set if project.roles else set()
        own = _chains(config.for_project(project.name))
        chains += [(project.name, role, chain) for role, chain in own.items() if role in named]
    out = []
    for where, role, chain in chains:
        for profile in chain:
            spec = specs.get(profile.adapter)
            tools = tools_for(role, profile.tools)
            out.append(
                ToolMapping(
                    role=role,
                    project=where,
                    adapter=profile.adapter,
                    tools=None if tools is None else ordered(tools),
                    args=spec.tool_args(tools) if spec else [],
                    env=spec.tool_env(tools) if spec else {},
                    narrows=spec.capabilities.tools if spec else None,
                )
            )
    return out


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
    if profile.resume and spec is not None and spec.capabilities.resume.startswith("no"):
        why = spec.capabilities.resume.removeprefix("no").strip(" ()")
        problems.append(
            f"resume: true, but {spec.name} cannot continue a session headless"
            + (f" ({why})" if why else "")
            + ": its send-backs start afresh"
        )
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


def render(report: DoctorReport) -> list[str]:
    """The report as a person reads it."""
    lines = [head(report), report.sandbox, *render_wall(report.wall), *_tools(report), ""]
    lines += [*_table(_rows(report.adapters)), ""]
    lines.append("roles:")
    for project in [None, *report.projects]:
        if project is not None:
            overrides = "; ".join(project.overrides)
            lines.append(f"  project {project.name}, in place of the above: {overrides}")
        indent = "  " if project is None else "    "
        name = project.name if project else None
        lines += [indent + _role_line(r) for r in report.roles if r.project == name]
    lines += ["", *_tool_lines(report.tools), ""]
    if report.requests:
        lines += [REQUESTS_HEADING, *(f"  {request_line(r)}" for r in report.requests), ""]
    if not report.problems:
        return [*lines, "problems: none"]
    return [*lines, "problems:", *(f"  - {p}" for p in report.problems)]


def _tools(report: DoctorReport) -> list[str]:
    """git, bubblewrap and the store, a line each."""
    git, bwrap, store = report.git, report.bubblewrap, report.store
    lines = [
        f"git: {git.version} ({git.path})" if git.ok else f"git: NOT USABLE: {git.problem}",
        f"bubblewrap: {bwrap.version or 'version unknown'} ({bwrap.path}), usable"
        if bwrap.ok
        else f"bubblewrap: not usable: {bwrap.problem}",
    ]
    if store.reachable is None:
        return [*lines, f"store: {store.url}"]
    return [*lines, f"store: {store.url} {'reachable' if store.reachable else 'UNREACHABLE'}"]


def _table(rows: list[list[str]]) -> list[str]:
    widths = [max(len(row[i]) for row in rows) for i in range(len(rows[0]))]
    out = [
        "  ".join(cell.ljust(width) for cell, width in zip(row, widths, strict=True)).rstrip()
        for row in rows
    ]
    out.insert(1, "  ".join("-" * width for width in widths))
    return out


# The adapter table's columns, one row per adapter (`_rows`).
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
    "login",  # what the CLI's own probe, a key variable or a credentials file says
]
CAPABILITIES = (  # Capabilities' fields, in the table's order
    "structured_output",
    "usage",
    "cost",
    "resume",
    "sandbox_flags",
    "project_config_off",
)


def _rows(adapters: list[AdapterCheck]) -> list[list[str]]:
    """The adapter table: a row per adapter, its capabilities and its login."""
    rows = [COLUMNS]
    for a in adapters:
        if a.capabilities is None:
            rows.append([a.name, *["-"] * (len(COLUMNS) - 1)])
            continue
        rows.append(
            [
                a.name,
                a.path or "no",
                a.version or "-",
                _yes(a.supported) + (" (newer)" if a.newer_than_tested else ""),
                *(_cell(a.capabilities[key]) for key in CAPABILITIES),
                a.login.state + (f" ({a.login.by})" if a.login.by else "") if a.login else "-",
            ]
        )
    return rows


def _cell(value: str | bool) -> str:
    return _yes(value) if isinstance(value, bool) else value


def _tool_lines(mappings: list[ToolMapping]) -> list[str]:
    """Each role's tool classes, and what each CLI of its chain is given for them."""
    lines = ["tools (what each role's CLI may offer its model, and the flags that say so):"]
    heading = None
    for m in mappings:
        role = f"project {m.project}: {m.role}" if m.project else m.role
        classes = ", ".join(m.tools) if m.tools is not None else "the CLI's own (tools: cli)"
        if (role, classes) != heading:
            heading = (role, classes)
            lines.append(f"  {role:<9} {classes or 'none'}")
        shown = [" ".join(shlex.quote(arg) for arg in m.args)] if m.args else []
        if m.env:
            shown.append("env " + " ".join(f"{k}={shlex.quote(v)}" for k, v in m.env.items()))
        nothing = "(no flags)" if m.narrows else "(no such adapter)"
        lines.append(f"    {m.adapter:<9} {'; '.join(shown) or nothing}")
    return lines


def _role_line(role: RoleCheck) -> str:
    chain_text = " -> ".join(role.chain)
    plays = "plays: " + role.plays if role.plays else "NO USABLE ADAPTER"
    return f"{role.role:<9} {chain_text:<30} {plays}"
