"""Pilot test: the cockpit's status line says when t25.yaml changed - what now applies,
what waits for a restart, or why nothing of it does (core.config.live)."""

from __future__ import annotations

import yaml

from tests.support.cockpit import app_for, settle_board, until


async def test_the_status_line_says_what_a_change_to_t25_yaml_did(seeded):
    path = seeded.control.config.path
    app = app_for(seeded)
    async with app.run_test(size=(120, 30)) as pilot:
        await settle_board(app, pilot)
        config = yaml.safe_load(path.read_text())
        config.setdefault("limits", {})["max_review_loops"] = 5
        path.write_text(yaml.safe_dump(config))
        await until(pilot, lambda: "t25.yaml changed" in app.status_note)
        assert app.status_note == "t25.yaml changed: limits.max_review_loops now in force"
        assert seeded.control.config.limits.max_review_loops == 5

        path.write_text("limits: [\n")
        await until(pilot, lambda: "does not load" in app.status_note)
        assert seeded.control.config.limits.max_review_loops == 5  # the one in force stays
