"""`t25 init`: t25.yaml and .factory/ in the repository (`t25 demo`: t25_tui.cli.demo)."""

from __future__ import annotations

import argparse
import asyncio
import os
import shutil
from collections.abc import Sequence
from pathlib import Path

from core.errors import ConfigError, T25Error
from core.workspace.git import git_sync, repo_root

FACTORY_DIR = ".factory"


def init(args: argparse.Namespace) -> int:
    from core.config.schema import default_config_text, load_config
    from t25_tui.runtime import open_runtime

    root = repo_root(Path.cwd())
    if root is None:
        raise T25Error(
            f"{Path.cwd()} is not inside a git repository",
            hint="run `git init` first, or cd into your repository",
        )
    target = Path(args.config).resolve() if args.config else root / "t25.yaml"
    if target.exists():
        raise ConfigError(
            f"{target} already exists; T25 is already set up here",
            hint="edit it, or remove it to start over (.factory/ is kept)",
        )
    found = installed_clis()
    tmp = target.with_name(f".{target.name}.tmp")
    tmp.write_text(with_roles(default_config_text(), found))
    try:
        config = load_config(tmp)
    except T25Error:
        tmp.unlink()
        raise
    os.replace(tmp, target)
    (root / FACTORY_DIR).mkdir(exist_ok=True)
    exclude_from_git(root, f"/{FACTORY_DIR}/")

    async def create_store() -> None:
        async with open_runtime(config):
            pass  # the store is created, migrated and its project registered on opening

    asyncio.run(create_store())
    print(f"created {target}")
    print(roles_note(found))
    print(f"created {root / FACTORY_DIR}/ (store, audit log, worktrees; ignored by git)")
    print("next: edit t25.yaml (roles, limits, QA checks), then file a task:")
    print('  t25 task new "describe the change" --type feat')
    return 0


ROLE_ORDER = ("spec", "planner", "dev", "qa", "reviewer", "docs")
_ROLES_START = "\nroles:\n"
_ROLES_END = "\n\n# Bounds the factory enforces"


def installed_clis() -> list[str]:
    """The agent CLIs found on PATH, in T25's order of preference (adapters.registry)."""
    from adapters.registry import agent_clis

    return [spec.name for spec in agent_clis() if shutil.which(spec.binary)]


def init_models(cli: str) -> tuple[str, str] | None:
    """The model `t25 init` names for the dev on `cli` and another for its reviewer: under the
    default `policies.reviewer_differs_from_author: model` a reviewer on the dev's model (or
    on the CLI's default, which T25 cannot tell from it) is passed over, and the review would
    wait. None: T25 knows no pair of models for that CLI (`CliAdapterSpec.init_models`)."""
    from adapters.registry import agent_clis

    return next((spec.init_models for spec in agent_clis() if spec.name == cli), None)


def chains(found: Sequence[str]) -> dict[str, list[dict[str, str]]]:
    """Every role's fallback chain for the CLIs `found` (claude when there are none): each
    role tries them in order; dev names its model, and the reviewer starts on another CLI,
    or on the same CLI with another model, so its own `t25 doctor` has nothing to say."""
    clis = list(found) or ["claude"]
    first, models = clis[0], init_models(clis[0])
    plain = [{"adapter": name} for name in clis]
    dev = [{"adapter": first, "model": models[0]} if models else plain[0], *plain[1:]]
    reviewer = plain[1:] + ([{"adapter": first, "model": models[1]}] if models else [])
    if not reviewer:  # one CLI whose models T25 does not know: doctor will say so
        reviewer = plain
    out = dict.fromkeys(ROLE_ORDER, plain)
    return out | {"dev": dev, "reviewer": reviewer}


def with_roles(template: str, found: Sequence[str]) -> str:
    """The shipped t25.yaml.example with its `roles:` block written for the CLIs found."""
    start = template.index(_ROLES_START) + 1
    end = template.index(_ROLES_END, start)
    said = ", ".join(found) if found else "none; install one, or name yours"
    lines = [f"roles:                        # written by `t25 init`; CLIs found on PATH: {said}"]
    for role, chain in chains(found).items():
        profiles = ", ".join(
            "{" + ", ".join(f"{key}: {value}" for key, value in p.items()) + "}" for p in chain
        )
        lines.append(f"  {role}: [{profiles}]")
    lines.append("  # security: [{adapter: claude, model: opus}]   # off unless listed")
    return template[:start] + "\n".join(lines) + template[end:]


def roles_note(found: Sequence[str]) -> str:
    """What `t25 init` says about the roles it wrote."""
    if not found:
        from adapters.registry import agent_clis

        looked = ", ".join(spec.binary for spec in agent_clis())
        return (
            f"no agent CLI found on PATH (looked for {looked}): the roles name claude; "
            "install Claude Code, or edit roles in t25.yaml (see `t25 doctor`)"
        )
    if len(found) == 1 and init_models(found[0]) is None:
        return (
            f"roles: {found[0]} (found on PATH); T25 knows no second model of it for the "
            "reviewer: name one in roles.reviewer (model: ...), or set "
            "policies.reviewer_differs_from_author: off"
        )
    by = "another CLI" if len(found) > 1 else "another model"
    return f"roles: {', '.join(found)} (found on PATH); reviews by {by} than the dev's"


def exclude_from_git(root: Path, pattern: str) -> None:
    """Add `pattern` to the repository's .git/info/exclude (shared by all worktrees)."""
    common = Path(git_sync("rev-parse", "--git-common-dir", cwd=root))
    exclude = (common if common.is_absolute() else root / common) / "info" / "exclude"
    exclude.parent.mkdir(parents=True, exist_ok=True)
    lines = exclude.read_text().splitlines() if exclude.exists() else []
    if pattern not in lines and pattern.strip("/") not in lines:
        with exclude.open("a") as fh:
            fh.write(
                ("" if not lines or exclude.read_text().endswith("\n") else "\n") + pattern + "\n"
            )
