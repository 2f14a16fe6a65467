"""How each CLI's login status command is read (its real outputs, as the pinned versions
print them logged in and out), and a probe that hangs is cut off, never waited on."""

from __future__ import annotations

import shutil
from collections.abc import Callable

import pytest

from adapters import login
from adapters.base import CliAdapterSpec
from adapters.login import LoginProbe, LoginState, check_login
from adapters.registry import builtin_specs

LOGGED_OUT_CLAUDE = (
    '{\n  "loggedIn": false,\n  "authMethod": "none",\n  "apiProvider": "firstParty"\n}\n'
)
KEYED_CLAUDE = (
    '{"loggedIn": true, "authMethod": "api_key", "apiProvider": "firstParty", '
    '"apiKeySource": "ANTHROPIC_API_KEY"}'
)
CODEX_WARNING = "WARNING: proceeding, even though we could not create PATH aliases: …\n"
OPENCODE_EMPTY = "┌  Credentials ~/.local/share/opencode/auth.json\n│\n└  0 credentials\n"
OPENCODE_ENV = (
    OPENCODE_EMPTY
    + "\n┌  Environment\n│\n●  Anthropic ANTHROPIC_API_KEY\n│\n└  1 environment variable\n"
)


def _status(cli: str) -> Callable[[int, str, str], bool | None]:
    """How the registered CLI's own status command is read (its adapter's probe)."""
    probe = next(spec.login_probe for spec in builtin_specs() if spec.name == cli)
    assert probe is not None
    return probe.read


def test_each_status_command_is_read_as_yes_no_or_cannot_tell():
    claude, codex, opencode = _status("claude"), _status("codex"), _status("opencode")
    assert claude(1, LOGGED_OUT_CLAUDE, "") is False
    assert claude(0, KEYED_CLAUDE, "") is True
    assert claude(1, "Not logged in. Run claude auth login", "") is None
    assert codex(1, "", CODEX_WARNING + "Not logged in\n") is False
    assert codex(0, "Logged in using ChatGPT\n", CODEX_WARNING) is True
    assert codex(2, "", "error: unexpected argument") is None
    assert opencode(0, OPENCODE_EMPTY, "") is False
    assert opencode(0, OPENCODE_ENV, "") is True
    assert opencode(1, "", "boom") is None


def test_every_probe_says_how_to_log_in_and_only_t25s_own_agent_needs_none():
    specs = {spec.name: spec for spec in builtin_specs()}
    probed = {name for name, spec in specs.items() if spec.login_probe}
    assert probed == {"claude", "codex", "opencode"}
    assert all(specs[name].login_probe.log_in.startswith(name) for name in probed)
    assert [name for name, spec in specs.items() if not spec.needs_login] == ["scripted"]


class Hanging(CliAdapterSpec):
    name = binary = "hanging"
    login_probe = LoginProbe(("30",), lambda code, out, err: True, "hanging login")


async def test_a_probe_that_hangs_is_cut_off_and_says_so(monkeypatch, tmp_path):
    monkeypatch.setattr(login, "PROBE_TIMEOUT_S", 0.3)
    monkeypatch.setenv("HOME", str(tmp_path))
    found = await check_login(Hanging(), shutil.which("sleep"))
    assert found.state is LoginState.UNKNOWN
    assert found.text() == "unknown (`hanging 30` gave no answer)"


@pytest.mark.parametrize("key", ["ANTHROPIC_API_KEY", "CLAUDE_CODE_OAUTH_TOKEN"])
async def test_a_key_variable_is_a_login_where_the_cli_is_not_installed(monkeypatch, tmp_path, key):
    monkeypatch.setenv("HOME", str(tmp_path))
    claude = next(s for s in builtin_specs() if s.name == "claude")
    for name in login.key_variables(claude):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv(key, "sk-secret")
    found = await check_login(claude, None)
    assert (found.state, found.by) == (LoginState.YES, f"{key} is set")
