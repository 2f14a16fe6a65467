-- 0012: a task's own budget per role, where an operator's answer raised one past
-- limits.by_role (a JSON object, role -> {"usd", "tokens"}); NULL: the configured ones.

ALTER TABLE tasks ADD COLUMN role_budgets TEXT;
