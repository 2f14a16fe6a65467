-- 0015: the task branch's head as T25's last run on it left it (its commit, or the branch as
-- the run found it). Every later run checks the branch still holds it, and a run's second
-- attempt starts there, whatever a lost attempt committed on top. NULL: no run yet.

ALTER TABLE tasks ADD COLUMN branch_head text;
