"""Each policy at its exact boundary: code decides, the model's word is only data."""

from __future__ import annotations

from dataclasses import FrozenInstanceError
from datetime import UTC, datetime

import pytest

from core.config.policy_config import ApprovalPolicy, Policies
from core.config.schema import Limits
from core.control.policies import (
    check_dependency_budget,
    check_diff_limits,
    evaluate_qa,
    evaluate_review,
    may_loop_again,
    merge_refusal,
    protected_touched,
    requires_plan_approval,
    unnamed_protected,
)
from core.domain.answers import Finding, PlanAnswer, ReviewAnswer
from core.domain.models import CheckResult, DiffStat, Task, TaskState

NOW = datetime(2026, 1, 1, tzinfo=UTC)


def task(**fields) -> Task:
    base = {
        "id": "T-7",
        "project": "demo",
        "title": "Add rate limiting",
        "type": "feat",
        "state": TaskState.DONE,
        "created_at": NOW,
        "state_since": NOW,
    }
    return Task(**{**base, **fields})


def stat(files: int, lines: int) -> DiffStat:
    return DiffStat(files=tuple(f"f{i}.py" for i in range(files)), added=lines, deleted=0)


def finding(severity: str, message: str = "something") -> Finding:
    return Finding(severity=severity, message=message)


def check(name: str, passed: bool, required: bool = True) -> CheckResult:
    return CheckResult(name=name, passed=passed, required=required)


# -- diff limits --------------------------------------------------------------------------------


LIMITS = Limits(max_files_changed=25, max_diff_lines=1000)


def test_diff_exactly_at_both_limits_is_within():
    assert check_diff_limits(stat(25, 1000), LIMITS) is None


def test_empty_diff_is_within():
    assert check_diff_limits(DiffStat(), LIMITS) is None


def test_one_file_over_the_limit_names_files_only():
    reason = check_diff_limits(stat(26, 1000), LIMITS)
    assert reason == "the change touches 26 files (limit 25)"


def test_one_line_over_the_limit_counts_added_and_deleted():
    over = DiffStat(files=("a.py",), added=600, deleted=401)
    assert check_diff_limits(over, LIMITS) == "the change touches 1,001 lines (limit 1,000)"


def test_both_limits_exceeded_in_one_line():
    reason = check_diff_limits(stat(31, 1480), LIMITS)
    assert reason == "the change touches 31 files (limit 25) and 1,480 lines (limit 1,000)"
    assert "\n" not in reason


def test_singular_nouns():
    assert check_diff_limits(stat(1, 0), Limits(max_files_changed=1)) is None
    assert check_diff_limits(stat(0, 2), Limits(max_diff_lines=1)) == (
        "the change touches 2 lines (limit 1)"
    )
    assert check_diff_limits(DiffStat(added=1), Limits(max_diff_lines=1)) is None


# -- plan approval --------------------------------------------------------------------------------


def plan(risk: str) -> PlanAnswer:
    return PlanAnswer(steps=["do it"], files=["a.py"], risk=risk, rationale="because")


@pytest.mark.parametrize(("risk", "required"), [("low", False), ("medium", False), ("high", True)])
def test_default_policy_approves_only_high_risk(risk, required):
    assert requires_plan_approval(plan(risk), ApprovalPolicy()) is required


def test_policy_can_require_approval_for_every_risk_or_none():
    every = ApprovalPolicy(require_for_risk=["low", "medium", "high"])
    assert all(requires_plan_approval(plan(r), every) for r in ("low", "medium", "high"))
    never = ApprovalPolicy(require_for_risk=[])
    assert not any(requires_plan_approval(plan(r), never) for r in ("low", "medium", "high"))


# -- review ------------------------------------------------------------------------------------------


def test_no_findings_approves():
    verdict = evaluate_review([])
    assert verdict.approve and verdict.blocking == ()
    assert verdict.summary == "approve: no findings"


def test_minor_and_nit_findings_approve():
    verdict = evaluate_review([finding("minor")] * 3 + [finding("nit")])
    assert verdict.approve
    assert verdict.summary == "approve: 3 minor, 1 nit"


@pytest.mark.parametrize("severity", ["blocker", "major"])
def test_one_blocking_finding_requests_changes(severity):
    verdict = evaluate_review([finding("nit"), finding(severity, "the bug")])
    assert not verdict.approve
    assert verdict.blocking == (finding(severity, "the bug"),)


def test_summary_counts_in_severity_order():
    findings = [finding("major"), finding("minor"), finding("blocker"), finding("major")]
    verdict = evaluate_review(findings)
    assert verdict.summary == "changes requested: 1 blocker, 2 major, 1 minor"
    assert [f.severity for f in verdict.blocking] == ["major", "blocker", "major"]


def test_the_models_approve_is_ignored_when_a_major_finding_exists():
    output = ReviewAnswer(
        verdict="APPROVE",
        summary="LGTM, ship it",
        findings=[finding("major", "no test for the new branch")],
    )
    verdict = evaluate_review(output.findings)
    assert not verdict.approve
    assert verdict.summary.startswith("changes requested")


def test_the_models_reject_is_ignored_without_blocking_findings():
    output = ReviewAnswer(verdict="REQUEST_CHANGES", findings=[finding("nit")])
    assert evaluate_review(output.findings).approve


def test_blocking_severities_are_configurable_and_checked():
    strict = evaluate_review([finding("minor")], blocking=frozenset({"blocker", "major", "minor"}))
    assert not strict.approve
    with pytest.raises(ValueError, match="unknown severities"):
        evaluate_review([], blocking=frozenset({"critical"}))


def test_review_verdict_is_immutable():
    with pytest.raises(FrozenInstanceError):
        evaluate_review([]).approve = False  # type: ignore[misc]


# -- QA ------------------------------------------------------------------------------------------------


def test_no_checks_configured_is_a_pass():
    verdict = evaluate_qa([])
    assert verdict.passed and verdict.failures == ()
    assert verdict.summary == "no QA checks configured"


def test_all_required_checks_passing_passes():
    verdict = evaluate_qa([check("lint", True), check("tests", True)])
    assert verdict.passed
    assert verdict.summary == "all 2 checks passed"


def test_one_failed_required_check_fails_and_is_listed():
    verdict = evaluate_qa([check("lint", True), check("tests", False), check("types", False)])
    assert not verdict.passed
    assert [c.name for c in verdict.failures] == ["tests", "types"]
    assert verdict.summary == "required 2 checks failed: tests, types (1 of 3 passed)"


def test_a_failed_optional_check_does_not_fail_qa():
    verdict = evaluate_qa([check("tests", True), check("docs-lint", False, required=False)])
    assert verdict.passed and verdict.failures == ()
    assert [c.name for c in verdict.optional_failures] == ["docs-lint"]
    assert "optional failed: docs-lint" in verdict.summary


def test_only_optional_checks_all_failing_still_passes():
    assert evaluate_qa([check("bench", False, required=False)]).passed


# -- loops ----------------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("loops", "bound", "again"),
    [
        (0, 2, True),
        (1, 2, True),
        (2, 2, False),
        (3, 2, False),
        (0, 0, False),
    ],
)
def test_loops_are_bounded(loops, bound, again):
    assert may_loop_again(loops, bound) is again


# -- merge -----------------------------------------------------------------------------------------------


def test_merge_allowed_when_done_checked_and_approved():
    assert merge_refusal(task(), checks_passed=True, review_approved=True) is None


def test_merge_needs_done():
    reason = merge_refusal(task(state=TaskState.REVIEW), checks_passed=True, review_approved=True)
    assert reason == "T-7 is in REVIEW; a merge needs DONE"


@pytest.mark.parametrize("checks", [False, None])
def test_merge_needs_passed_checks(checks):
    reason = merge_refusal(task(), checks_passed=checks, review_approved=True)
    assert reason == "its required checks have not passed"


@pytest.mark.parametrize("approved", [False, None])
def test_merge_needs_an_approving_verdict(approved):
    reason = merge_refusal(task(), checks_passed=True, review_approved=approved)
    assert reason == "its review verdict is not approve"


def test_merge_refused_twice():
    reason = merge_refusal(task(merged=True), checks_passed=True, review_approved=True)
    assert reason == "T-7 is already merged"


def test_merge_refused_when_archived():
    reason = merge_refusal(task(archived=True), checks_passed=True, review_approved=True)
    assert reason == "T-7 is archived"


# -- protected paths -------------------------------------------------------------------------

DEFAULTS = Policies().protected


@pytest.mark.parametrize(
    "path",
    [
        ".github/workflows/ci.yml",
        ".github/workflows/nested/deploy.yaml",
        ".gitlab-ci.yml",
        ".circleci/config.yml",
        ".claude/settings.json",
        ".claude/commands/x.md",
        ".mcp.json",
        ".codex/config.toml",
        ".gemini/settings.json",
        "CLAUDE.md",
        "docs/CLAUDE.md",  # a name without a slash: at any depth
        "AGENTS.md",
        "svc/api/GEMINI.md",
        "t25.yaml",
        ".gitattributes",
        ".githooks/pre-commit",
        ".husky/pre-push",
        "package.json",
        "web/package.json",
        "package-lock.json",
        "yarn.lock",
        "pnpm-lock.yaml",
        "pyproject.toml",
        "requirements.txt",
        "requirements-dev.txt",
        "dev-requirements.txt",
        "requirements/base.in",
        "constraints.txt",
        "conftest.py",
        "src/pkg/tests/conftest.py",
        "pytest.ini",
        "tox.ini",
        "setup.cfg",
        "noxfile.py",
        "Makefile",
        "justfile",
        "web/jest.config.ts",
        "vitest.config.mjs",
        ".mocharc.yml",
        "CMakeLists.txt",
        "cmake/deps.cmake",
        "poetry.lock",
        "uv.lock",
        "Pipfile",
        "Pipfile.lock",
        "Cargo.toml",
        "crates/core/Cargo.toml",
        "Cargo.lock",
        "go.mod",
        "go.sum",
        "Gemfile",
        "Gemfile.lock",
    ],
)
def test_the_default_protected_paths_cover_ci_agent_config_t25_git_harness_and_manifests(path):
    assert protected_touched([path], DEFAULTS) == (path,)


@pytest.mark.parametrize(
    "path",
    [
        "app.py",
        "src/github/workflows.py",  # not the anchored .github/workflows/
        "docs/.github/workflows/ci.yml",  # anchored at the root
        "CLAUDE.md.bak",
        "my-package.json",
        "requirements.in",
        "notes/claude.md",  # names are case-sensitive, as git's are
        ".github/dependabot.yml",
    ],
)
def test_other_paths_are_not_protected_by_default(path):
    assert protected_touched([path], DEFAULTS) == ()


def test_patterns_are_gitignore_style_and_a_directory_covers_what_is_beneath_it():
    paths = ["db/migrations/0001.sql", "migrations/x.sql", "src/a/b/secret.key", "src/x.key"]
    assert protected_touched(paths, ["migrations"]) == (
        "db/migrations/0001.sql",
        "migrations/x.sql",
    )
    assert protected_touched(paths, ["db/migrations/"]) == ("db/migrations/0001.sql",)
    assert protected_touched(paths, ["src/*.key"]) == ("src/x.key",)  # * stays in a segment
    assert protected_touched(paths, ["src/**/*.key"]) == ("src/a/b/secret.key", "src/x.key")
    assert protected_touched(paths, ["/migrations/*.sq?"]) == ("migrations/x.sql",)
    assert protected_touched(paths, []) == ()


def test_the_touched_paths_are_sorted_each_once_and_a_rename_counts_its_old_name():
    stat = DiffStat(files=("b.txt", "package.json"), renamed_from=(".github/workflows/ci.yml",))
    touched = [*stat.touched, "package.json"]
    assert protected_touched(touched, DEFAULTS) == (".github/workflows/ci.yml", "package.json")


def test_a_user_list_replaces_the_defaults_and_extra_paths_add_to_either():
    assert Policies(protected_paths=["infra/**"]).protected == ("infra/**",)
    extended = Policies(extra_protected_paths=["infra/**"]).protected
    assert extended[-1] == "infra/**" and ".mcp.json" in extended


def test_a_merge_names_every_protected_path_or_the_ones_left_out_are_listed():
    done = task(protected_paths=("package.json", ".github/workflows/ci.yml"))
    assert unnamed_protected(done, []) == ("package.json", ".github/workflows/ci.yml")
    assert unnamed_protected(done, ["package.json", "other"]) == (".github/workflows/ci.yml",)
    assert unnamed_protected(done, [".github/workflows/ci.yml", "package.json"]) == ()
    assert unnamed_protected(task(), []) == ()
    odd = task(protected_paths=("bad\x1bname/package.json",))  # named as it is shown
    assert unnamed_protected(odd, ["bad\\x1bname/package.json"]) == ()


# -- the new-dependency budget ------------------------------------------------------------


def test_no_budget_takes_any_number_of_new_dependencies():
    assert Limits().max_new_dependencies is None
    added = [f"requirements.txt: p{i}" for i in range(500)]
    assert check_dependency_budget(added, Limits()) is None


@pytest.mark.parametrize("budget", [0, 1, 2])
def test_the_budget_is_inclusive(budget):
    added = [f"package.json: p{i}" for i in range(budget)]
    assert check_dependency_budget(added, Limits(max_new_dependencies=budget)) is None


def test_over_the_budget_names_the_count_the_limit_and_each_dependency():
    limits = Limits(max_new_dependencies=0)
    assert check_dependency_budget(["go.mod: golang.org/x/sync"], limits) == (
        "the change adds 1 dependency (limit 0): go.mod: golang.org/x/sync"
    )
    two = ["Cargo.toml: serde", "package.json: react"]
    assert check_dependency_budget(two, Limits(max_new_dependencies=1)) == (
        "the change adds 2 dependencies (limit 1): Cargo.toml: serde, package.json: react"
    )


def test_documentation_is_named_by_docs_paths_and_never_a_protected_path():
    from core.config.policy_config import Policies
    from core.control.policies import beyond_documentation

    policy = Policies()
    assert beyond_documentation(["README.md", "docs/guide/intro.rst", "a.adoc"], policy) == ()
    # text a tool reads, and markdown that runs (MDX is JSX), are not documentation
    assert beyond_documentation(["NOTES.txt", "page.mdx"], policy) == ("NOTES.txt", "page.mdx")
    assert beyond_documentation(["README.md", "docs/conf.py", "AGENTS.md"], policy) == (
        "AGENTS.md",
        "docs/conf.py",
    )
    assert beyond_documentation(["requirements-dev.txt"], policy) == ("requirements-dev.txt",)
    narrow = Policies(docs_paths=["docs/**"])
    assert beyond_documentation(["docs/a.py", "README.md"], narrow) == ("README.md",)


@pytest.mark.parametrize(
    ("change", "guarded_paths"),
    [
        (DiffStat(files=("tests/test_a.py",), removed=("tests/test_a.py",)), ("tests/test_a.py",)),
        (DiffStat(files=("a_test.go",), removed=("a_test.go",)), ("a_test.go",)),
        (DiffStat(files=("web/x.spec.ts",), removed=("web/x.spec.ts",)), ("web/x.spec.ts",)),
        # renamed away: where it was counts
        (
            DiffStat(files=("tests/cases.py",), renamed_from=("tests/test_a.py",)),
            ("tests/test_a.py",),
        ),
        # an edited or added test, or a removed file that is no test, is not
        (DiffStat(files=("tests/test_a.py", "tests/test_new.py")), ()),
        (DiffStat(files=("src/old.py",), removed=("src/old.py",)), ()),
    ],
)
def test_a_change_that_takes_a_test_away_is_guarded_like_a_protected_path(change, guarded_paths):
    from core.config.policy_config import Policies
    from core.control.policies import guarded

    assert guarded(change, Policies()) == guarded_paths
    assert guarded(change, Policies(test_paths=[])) == ()
