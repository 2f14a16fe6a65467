"""Write the cockpit's screenshots (SVG) into this directory from seeded data.

    .venv/bin/python screenshots/make.py

The app comes from the same `make_app` that `t25 tui` and the tests use, over the seeded
board of `t25_tui.tui.sample_data` (fixed ids, pinned times, a frozen clock), so the README never
shows a UI that no longer exists.
"""

from __future__ import annotations

import asyncio
import os
import sys
import tempfile
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent))

from t25_tui.runtime import open_sample  # noqa: E402
from t25_tui.tui.app import make_app  # noqa: E402
from t25_tui.tui.screens.base import T25Screen  # noqa: E402


async def shoot(
    name: str, keys: list[str], *, focus: str | None = None, size: tuple[int, int] = (120, 36)
) -> None:
    with tempfile.TemporaryDirectory() as tmp:
        seeded = await open_sample(Path(tmp) / "shop")
        app = make_app(seeded.control, clock=seeded.clock, actor="ana@ops")
        async with app.run_test(size=size) as pilot:
            await asyncio.wait_for(app.loaded.wait(), 10)
            await pilot.pause(0.2)
            if focus:
                app.board.focus_task(focus)
            for key in keys:
                await pilot.press(key)
                await pilot.pause(0.15)
            for _ in range(100):
                if not isinstance(app.screen, T25Screen) or app.screen.ready:
                    break
                await pilot.pause(0.05)
            await pilot.pause(0.5)
            app.save_screenshot(f"{name}.svg", path=str(HERE))
        await seeded.close()
    print(f"screenshots/{name}.svg")


async def main() -> None:
    await shoot("board", [], focus="T-2")
    await shoot("board-80x24", [], focus="T-2", size=(80, 24))
    await shoot("approval", ["a"], focus="T-2")
    await shoot("merge", ["m"], focus="T-1")
    await shoot("detail", ["enter", "2"], focus="T-1")
    await shoot("log", ["w"], focus="T-3")
    await shoot("diff", ["enter", "d"], focus="T-1")
    await shoot(
        "new-task",
        ["n", *("space" if c == " " else c for c in "Refund a cancelled order"), "tab"],
        size=(100, 30),
    )
    await shoot("inbox", ["i"])
    await shoot("cost", ["c"])
    await shoot("audit", ["u"])
    await shoot("help", ["question_mark"])


if __name__ == "__main__":
    for var in ("GIT_AUTHOR_DATE", "GIT_COMMITTER_DATE"):  # the same commits, the same ids
        os.environ[var] = "2026-01-01T12:00:00+00:00"
    asyncio.run(main())
