-- 0003: what a run changed outside its worktree, kept until an operator acknowledges it;
-- while it is set, retry and merge are refused. NULL: nothing to acknowledge.

ALTER TABLE tasks ADD COLUMN violation text;
