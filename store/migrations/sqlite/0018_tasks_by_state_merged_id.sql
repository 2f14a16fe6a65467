-- 0018: the tasks of a state, newest first, in one walk of an index.
--
-- The board draws every task still in the pipeline or waiting for its merge, and only the
-- newest of the finished ones (DONE and merged, CANCELLED); `t25 task list` counts the
-- finished ones rather than listing them. Ordered by state, whether merged, then id, this
-- index hands over the hundred newest of a state however many thousands it holds, finds
-- the DONE tasks not yet merged among them, and counts either without reading the rows.
-- It leads with `state`, so the index on state alone is no longer needed.
CREATE INDEX tasks_by_state_merged_id ON tasks (state, merged, id);
DROP INDEX tasks_by_state;

-- `t25 task show` reads a task's transitions, decisions, questions and network records, never
-- its agents' output: each kind of a task's events, in id order, is one range of this index,
-- however much output the task's runs printed.
CREATE INDEX events_by_task_and_kind ON events (task_id, kind, id);
