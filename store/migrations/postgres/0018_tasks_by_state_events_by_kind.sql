-- 0018: the tasks of a state, newest first, in one walk of an index.
--
-- The board draws every task still in the pipeline or waiting for its merge, and only the
-- newest of the finished ones (DONE and merged, CANCELLED); `t25 task list` counts the
-- finished ones rather than listing them. Ordered by state, whether merged, whether
-- archived, then id, this index hands over the hundred newest of a state however many
-- thousands it holds, finds the DONE tasks not yet merged among them, and counts either
-- without reading the table. It replaces the index on state alone, under the same name.
DROP INDEX tasks_by_state;
CREATE INDEX tasks_by_state ON tasks (state, merged, archived, id);

-- `t25 task show` reads a task's transitions, decisions, questions and network records, never
-- its agents' output: each kind of a task's events, in id order, is one range of this index,
-- however much output the task's runs printed.
CREATE INDEX events_by_task_and_kind ON events (task_id, kind, id);

-- A remote worker's output reaches serve in batches, each retried until one serve answers:
-- a batch kept by a serve that died before answering is sent again to the next (a restarted
-- one, another replica). Each event a worker sends carries its place in its lease's outbox
-- (`sent`: the lease's token and the event's number); kept once per run, a batch sent twice
-- is kept once, by whichever serve takes it.
ALTER TABLE events ADD COLUMN sent text;
CREATE UNIQUE INDEX events_sent_once ON events (run_id, sent) WHERE sent IS NOT NULL;
