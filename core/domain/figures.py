"""What a QA check's test runner reported, and how it compares with the default branch.

A check is a command; when T25 knows its runner (pytest's final summary line, or a JUnit XML
report the check writes: adapters.figures), its `CheckResult` (core.domain.models) carries the runner's
`Figures`. The `Baseline` is what each check reported the last time the checks ran on the
default branch: on the merge commit the last merge made its head (core.control.baselines).
Shown side by side, a change that skips a test reads "1 more skipped than on main" where
"passed" alone would hide it.
"""

from __future__ import annotations

from typing import Annotated, Literal

from pydantic import BaseModel, ConfigDict, Field

# The counts, in the order pytest prints them and T25 shows them.
KINDS = ("failed", "passed", "skipped", "deselected", "xfailed", "xpassed", "errors")

# A count above this is not a test suite's: its report is not believed.
MAX_COUNT = 10**9 - 1

Count = Annotated[int, Field(ge=0, le=MAX_COUNT)]


class Figures(BaseModel):
    """The tests a check's runner reported, by outcome (`source`: where T25 read them)."""

    model_config = ConfigDict(frozen=True, extra="forbid", defer_build=True)

    source: Literal["pytest", "junit"]
    passed: Count = 0
    failed: Count = 0
    skipped: Count = 0
    deselected: Count = 0
    xfailed: Count = 0
    xpassed: Count = 0
    errors: Count = 0

    def counts(self) -> dict[str, int]:
        return {kind: getattr(self, kind) for kind in KINDS}

    def summary(self) -> str:
        """`41 passed, 3 skipped`, in pytest's words; `no tests ran` when all are nought."""
        shown = [_count(kind, n) for kind, n in self.counts().items() if n]
        return ", ".join(shown) or "no tests ran"

    def against(self, base: Figures, branch: str) -> str:
        """How these differ from `base`, the default branch's: `3 more skipped than on
        main`, `1 fewer passed, 1 more failed than on main`, or `as on main`."""
        moved = []
        for kind, n in self.counts().items():
            was = getattr(base, kind)
            if n != was:
                moved.append(f"{abs(n - was)} {'more' if n > was else 'fewer'} {_word(kind, 2)}")
        return f"{', '.join(moved)} than on {branch}" if moved else f"as on {branch}"


class Baseline(BaseModel):
    """What each check's runner reported on the default branch's head, as the merge that
    made it the head ran them (`task_id`'s merge, `commit`); checks with no figures are
    left out."""

    model_config = ConfigDict(frozen=True, extra="forbid", defer_build=True)

    branch: str
    commit: str
    task_id: str
    figures: dict[str, Figures] = {}


def figures_line(figures: Figures, name: str, baseline: Baseline | None) -> str:
    """`41 passed, 3 skipped — 3 more skipped than on main` for the check `name`; the
    counts alone when the default branch has none for it."""
    base = baseline.figures.get(name) if baseline is not None else None
    if base is None or baseline is None:
        return figures.summary()
    return f"{figures.summary()} — {figures.against(base, baseline.branch)}"


def _count(kind: str, n: int) -> str:
    return f"{n} {_word(kind, n)}"


def _word(kind: str, n: int) -> str:
    """pytest's word for a count: `1 error`, `2 errors`; the others do not change."""
    return "error" if kind == "errors" and n == 1 else kind
