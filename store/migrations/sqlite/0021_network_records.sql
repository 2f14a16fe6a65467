-- 0021: a task's network records, in one walk of an index.
--
-- A task's detail tallies the connections its runs' proxies recorded: output events on the
-- `network` stream. Found through 0018's index on (task, kind, id), they were every output
-- event of the task, each payload read for its stream to keep the few network ones, so the
-- cockpit's detail screen read a long run's every line before it showed that run's log.
-- Named literally in the statement that reads them (store.sqlite_sql.TASK_NETWORK_AFTER).
CREATE INDEX events_network ON events (task_id, id)
    WHERE kind = 'run_output' AND json_extract(payload, '$.stream') = 'network';
