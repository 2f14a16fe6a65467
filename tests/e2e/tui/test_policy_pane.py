"""The profiles screen's policy lines name every policy in force, as t25.yaml spells it."""

from __future__ import annotations

from core.config.policy_config import DEFAULT_PROTECTED_PATHS
from core.config.schema import Config
from t25_tui.tui.screens.panes import policy_lines


def test_the_policy_lines_name_the_protected_paths_the_review_rule_and_the_budget():
    config = Config.model_validate(
        {
            "projects": [{"name": "app"}],
            "limits": {"max_new_dependencies": 3},
            "policies": {
                "protected_paths": ["infra/**", "package.json"],
                "reviewer_differs_from_author": "adapter",
            },
        }
    )
    lines = policy_lines(config)
    assert "  policies.protected_paths infra/**, package.json" in lines
    assert "  policies.reviewer_differs_from_author adapter" in lines
    assert "  limits.max_new_dependencies 3" in lines
    defaults = policy_lines(Config.model_validate({"projects": [{"name": "app"}]}))
    assert "  limits.max_new_dependencies (no budget)" in defaults
    assert "  policies.reviewer_differs_from_author model" in defaults
    count = len(DEFAULT_PROTECTED_PATHS)
    assert f"  policies.protected_paths {count} patterns (.github/workflows/**, " in "\n".join(
        defaults
    )
