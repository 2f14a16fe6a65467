-- 0008: the commit a task's next run starts from, set by a reset (`t25 reset --to STAGE`) or
-- a retry of a failed implementation: the worker that takes the run moves the branch back
-- there first, keeping what it held under refs/t25/archive/. NULL: go on from the branch.

ALTER TABLE tasks ADD COLUMN rewind_to TEXT;
