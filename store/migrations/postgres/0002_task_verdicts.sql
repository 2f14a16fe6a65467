-- 0002: what code decided about a task's QA checks and review, for the merge gate.
-- NULL means "not decided yet"; true/false (checks) and 'approve'/'changes_requested' (review).

ALTER TABLE tasks ADD COLUMN checks_passed boolean;
ALTER TABLE tasks ADD COLUMN review_verdict text;
