-- 0009: a task's own budget, where an operator's answer raised it past limits.max_cost_usd
-- (USD) or limits.max_tokens; NULL: the configured one.

ALTER TABLE tasks ADD COLUMN budget_usd double precision;
ALTER TABLE tasks ADD COLUMN budget_tokens bigint;
