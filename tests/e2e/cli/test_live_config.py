"""t25.yaml changed while T25 runs: what the control plane decides with applies at the next
decision, a broken file changes nothing and says why, and the rest says it waits for a
restart (core.config.live)."""

from __future__ import annotations

import sys

import yaml

from core.config.live import ConfigFile
from core.config.schema import load_config
from core.domain.models import TaskState
from tests.support.pipeline import write_config

S = TaskState
FAILING = [{"name": "unit", "run": [sys.executable, "-c", "raise SystemExit('red')"]}]


def edit(repo, **changes) -> None:
    """Change t25.yaml as an operator's editor would: read, change, write."""
    path = repo / "t25.yaml"
    config = yaml.safe_load(path.read_text())
    for key, value in changes.items():
        section, _, name = key.partition(".")
        if name:
            config.setdefault(section, {})[name] = value
        else:
            config[section] = value
    path.write_text(yaml.safe_dump(config))


def test_what_applies_at_once_and_what_waits_for_a_restart(shop):
    write_config(shop, limits={"max_qa_loops": 1})
    config = load_config(shop / "t25.yaml")
    watched = ConfigFile(config)
    assert watched.reread(config) is None  # unchanged

    edit(shop, **{"limits.max_qa_loops": 4, "limits.run_timeout_s": 99, "approval": {}})
    roles = yaml.safe_load((shop / "t25.yaml").read_text())["roles"]
    edit(shop, roles={**roles, "docs": [{"adapter": "scripted", "model": "scripted-2"}]})
    found = watched.reread(config)
    assert found is not None and found.error is None
    assert found.config.limits.max_qa_loops == 4
    assert found.config.limits.run_timeout_s == config.limits.run_timeout_s  # at restart
    assert "limits.max_qa_loops" in found.applied
    assert {"roles", "limits.run_timeout_s"} <= set(found.restart)
    assert found.line().startswith("t25.yaml changed: ")
    assert "restart to apply roles, limits.run_timeout_s" in found.line()
    assert watched.reread(found.config) is None  # said once


def test_a_broken_file_keeps_the_configuration_in_force_and_says_why(shop):
    write_config(shop)
    config = load_config(shop / "t25.yaml")
    watched = ConfigFile(config)
    edit(shop, **{"limits.max_qa_loops": "many"})
    found = watched.reread(config)
    assert found is not None and found.config is config
    assert found.error is not None and "max_qa_loops" in found.error
    assert found.line().startswith("t25.yaml changed but does not load, so nothing of it applies")


async def test_a_raised_loop_limit_applies_at_the_next_decision(env, shop):
    """Before, a running T25 kept the limit it started with: raised to 1, QA still ended
    the task after 0 loops ("limit 0")."""
    control = await env.open(qa={"checks": FAILING}, limits={"max_qa_loops": 0})
    task = await env.new()
    edit(shop, **{"limits.max_qa_loops": 1})  # the operator raises it while T25 runs
    await env.work()
    task = await env.task(task.id)
    assert task.state is S.NEEDS_INPUT and task.qa_loops == 1, (task.state, task.qa_loops)
    assert (await env.history(task.id)).count(S.IMPLEMENTING) == 2
    assert control.config_notice == "t25.yaml changed: limits.max_qa_loops now in force"


async def test_a_broken_edit_changes_nothing_in_a_running_factory(env, shop):
    control = await env.open()
    task = await env.new()
    (shop / "t25.yaml").write_text("roles: [not, a, mapping\n")
    await env.work()
    assert (await env.task(task.id)).state is S.DONE
    assert control.config_notice is not None
    assert control.config_notice.startswith("t25.yaml changed but does not load")
