-- 0006: the changed paths policies.protected_paths names, as of the task's last
-- implementation (a JSON array of strings); a merge needs an approver to name each one.
-- NULL: none.

ALTER TABLE tasks ADD COLUMN protected_paths TEXT;
