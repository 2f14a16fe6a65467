"""Before the cockpit opens: is there a t25.yaml, and can any agent CLI play each role?

No Textual here; the `tui` command prints or shows what this finds.
"""

from __future__ import annotations

import os
from collections.abc import Mapping

from core.config.config_section import ROLES
from core.config.schema import Config
from core.ports import AgentAdapter


def binary_of(adapter: AgentAdapter) -> str:
    spec = getattr(adapter, "spec", None)
    return getattr(spec, "binary", adapter.name)


def missing_agents(config: Config, adapters: Mapping[str, AgentAdapter]) -> str | None:
    """None when every configured role has a usable adapter; else exactly what was
    looked for, where, and how to configure one."""
    looked: dict[str, list[str]] = {}  # binary or adapter name -> roles
    unplayable = []
    for role in ROLES:
        chain = config.roles.chain(role)
        if not chain:
            continue
        found = False
        for profile in chain:
            adapter = adapters.get(profile.adapter)
            name = (
                f"{binary_of(adapter)} (adapter {profile.adapter})"
                if adapter
                else f"adapter {profile.adapter!r}: T25 has no such adapter"
            )
            looked.setdefault(name, []).append(role)
            if adapter is not None and adapter.locate():
                found = True
                break
        if not found:
            unplayable.append(role)
    if not unplayable:
        return None
    lines = [f"No agent CLI can play: {', '.join(unplayable)}.", "", "T25 looked for:"]
    lines += [f"  {name}  — for {', '.join(roles)}" for name, roles in looked.items()]
    lines += [
        f"on PATH={os.environ.get('PATH', '')}",
        "",
        f"Install one of them, or name a CLI you have under `roles:` in {config.path.name}:",
        "  roles:",
        "    dev: [{adapter: " + (next(iter(sorted(adapters)), "claude")) + "}]",
        f"Adapters T25 knows: {', '.join(sorted(adapters))}.",
        "Press p in the cockpit to see each role's chain.",
    ]
    return "\n".join(lines)
