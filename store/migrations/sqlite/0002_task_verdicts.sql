-- 0002: what code decided about a task's QA checks and review, for the merge gate.
-- NULL means "not decided yet"; 1/0 (checks) and 'approve'/'changes_requested' (review).

ALTER TABLE tasks ADD COLUMN checks_passed INTEGER CHECK (checks_passed IN (0, 1));
ALTER TABLE tasks ADD COLUMN review_verdict TEXT;
