-- 0010: a task's priority (higher first; the queue takes runs by priority, then age) and
-- the tasks it waits for (a JSON array of ids, `t25 task new --after T-3`): it leaves
-- RECEIVED only once each of them is merged. NULL: it waits for none.

ALTER TABLE tasks ADD COLUMN priority integer NOT NULL DEFAULT 0;
ALTER TABLE tasks ADD COLUMN after_tasks text;
