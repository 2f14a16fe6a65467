"""A send-back's dev run continues the last dev run's CLI session: each CLI's argv for it
(checked against its captured `--help`), and the session id read from its real output."""

from __future__ import annotations

from pathlib import Path

import pytest

from adapters.base import CliAdapter, CliAdapterSpec
from adapters.claude import ClaudeSpec
from adapters.codex import CodexSpec
from adapters.opencode import OpencodeSpec
from adapters.process import ProcessResult
from adapters.prompt_files import PromptArg
from core.domain.agent import AgentRequest, Failure
from core.domain.models import TaskState

CAPTURES = Path(__file__).with_name("captures")
SESSION = "1e3f7ec1-dc01-400c-b687-a387728caf1c"


def read(name: str) -> str:
    return (CAPTURES / name).read_text(encoding="utf-8")


def request(resume_session: str | None = None) -> AgentRequest:
    return AgentRequest(
        task_id="T-1",
        run_id="R-2",
        role="dev",
        stage=TaskState.IMPLEMENTING,
        prompt="--fix the findings",
        cwd=Path("/tmp/tree"),
        model="m",
        args=("--extra",),
        resume_session=resume_session,
    )


def argv(spec: CliAdapterSpec, resume_session: str | None = None) -> list[str]:
    return spec.build_argv(request(resume_session), PromptArg(text="--fix the findings"))


def outcome(spec: CliAdapterSpec, stdout: str, *, stderr: str = "", code: int = 0):
    done = ProcessResult(exit_code=code, stdout=stdout.encode(), stderr=stderr.encode(), log=b"")
    return CliAdapter(spec)._result(request(SESSION), "x", done)


def test_claude_code_resumes_the_session_by_id_before_the_prompt():
    resumed = argv(ClaudeSpec(), SESSION)
    flags = resumed[: resumed.index("--")]
    assert flags[flags.index("--resume") + 1] == SESSION
    assert resumed[-2:] == ["--", "--fix the findings"]
    assert "-r, --resume [value]" in read("help/claude--help.txt")
    assert "--resume" not in argv(ClaudeSpec())  # a fresh run starts a session of its own


def test_codex_resumes_with_exec_resume_after_the_options_of_exec():
    resumed = argv(CodexSpec(), SESSION)
    fresh = argv(CodexSpec())
    # `exec resume` takes no -C nor --sandbox of its own: they are exec's, before it.
    at = resumed.index("resume")
    assert resumed[:at] == fresh[: fresh.index("--")]
    assert resumed[at:] == ["resume", SESSION, "--", "--fix the findings"]
    assert "-C" in resumed[:at] and "--sandbox" in resumed[:at] and "--json" in resumed[:at]
    assert "resume  Resume a previous session by id" in read("help/codex-exec--help.txt")
    resume_help = read("help/codex-exec-resume--help.txt")
    assert "[SESSION_ID] [PROMPT]" in resume_help
    assert "--sandbox" not in resume_help and "--cd" not in resume_help
    assert "resume" not in fresh


def test_opencode_resumes_the_session_by_id():
    resumed = argv(OpencodeSpec(), "ses_dd5c710a9ffeR1O6gy86jjixy5")
    flags = resumed[: resumed.index("--")]
    assert flags[flags.index("--session") + 1] == "ses_dd5c710a9ffeR1O6gy86jjixy5"
    assert "-s, --session" in read("help/opencode-run--help.txt")
    assert "--session" not in argv(OpencodeSpec())


def test_each_cli_reports_the_session_it_ran_in():
    claude = ClaudeSpec().parse(read("claude/write-tool.stream.jsonl"))
    assert claude.session_id and claude.session_id in read("claude/write-tool.stream.jsonl")
    codex = CodexSpec().parse(read("codex/apply-patch.jsonl"))
    assert codex.session_id == "01a22a36-0042-7972-ac4f-c0ddceddb930"  # thread.started
    opencode = OpencodeSpec().parse(read("opencode/ok.json-events.jsonl"))
    assert opencode.session_id == "ses_dd5c710a9ffeR1O6gy86jjixy5"


def test_a_resumed_run_says_which_session_it_continued_and_the_one_it_ran_in():
    result = outcome(ClaudeSpec(), read("claude/write-tool.stream.jsonl"))
    assert result.ok and result.resumed_session == SESSION
    assert (
        result.session_id == ClaudeSpec().parse(read("claude/write-tool.stream.jsonl")).session_id
    )


@pytest.mark.parametrize(
    ("spec", "stdout", "stderr", "said"),
    [
        (
            ClaudeSpec(),
            "claude/err-resume-missing.stream.jsonl",
            None,
            "No conversation found with session ID",
        ),
        (
            CodexSpec(),
            None,
            "codex/err-resume-missing.stderr-no-stacktrace.txt",
            "no rollout found",
        ),
        (OpencodeSpec(), None, "opencode/err-resume-missing.stderr.txt", "Session not found"),
    ],
)
def test_a_session_the_cli_no_longer_has_is_an_exit_failure_with_no_session(
    spec, stdout, stderr, said
):
    result = outcome(
        spec, read(stdout) if stdout else "", stderr=read(stderr) if stderr else "", code=1
    )
    assert result.failure is Failure.EXIT and said in (result.error or "")
    assert result.session_id is None  # not the one it was asked for, which does not exist


def test_a_session_id_that_could_be_read_as_an_option_is_not_kept():
    stdout = read("claude/write-tool.stream.jsonl").replace(
        ClaudeSpec().parse(read("claude/write-tool.stream.jsonl")).session_id or "", "--evil"
    )
    assert outcome(ClaudeSpec(), stdout).session_id is None


def test_doctor_says_when_a_profile_asks_a_cli_that_cannot_resume_to():
    from adapters.gemini import GeminiSpec
    from core.config.schema import AgentProfile
    from t25_tui.cli.doctor import _profile_problems

    def problems(spec: CliAdapterSpec) -> list[str]:
        profile = AgentProfile(adapter=spec.name, resume=True, sandbox="none")
        return [p for p in _profile_problems(profile, spec) if "resume" in p]

    (gemini,) = problems(GeminiSpec())
    assert gemini == (
        "resume: true, but gemini cannot continue a session headless "
        "(--resume takes latest or an index, not a session id): its send-backs start afresh"
    )
    assert problems(ClaudeSpec()) == problems(CodexSpec()) == problems(OpencodeSpec()) == []
