-- 0007: doubled work is impossible by construction.
--
-- At most one queued or running run per task and stage. An enqueue that meets this
-- index (a retried write whose reply was lost, a sweep racing a completion) finds the
-- run already there instead of adding a second. Runs that already doubled a stage keep
-- the oldest; the others are cancelled first, or the index could not be built.
UPDATE runs
SET status = 'cancelled', lease_expires_at = NULL, finished_at = clock_timestamp(),
    error = 'a second queued or running run of its stage, cancelled by migration 0007'
WHERE status IN ('queued', 'running') AND EXISTS (
    SELECT 1 FROM runs AS older
    WHERE older.task_id = runs.task_id AND older.stage = runs.stage
      AND older.status IN ('queued', 'running') AND older.id < runs.id
);
CREATE UNIQUE INDEX runs_one_active_per_stage ON runs (task_id, stage)
    WHERE status IN ('queued', 'running');

-- Fencing tokens are unique per claim across the store, not a per-run counter: a token
-- names one claim of one run, and (with the worker that claimed it) nothing else.
CREATE SEQUENCE lease_tokens AS bigint;
SELECT setval('lease_tokens', (SELECT coalesce(max(lease_token), 0) + 1 FROM runs), false);

-- The key of the claim that leased a run: a claim retried after its reply was lost finds
-- the run it leased, instead of leasing a second one while the first waits out its lease.
ALTER TABLE runs ADD COLUMN claim_key text;

-- The key a task's creation was written under: a retry of a write whose reply was lost
-- finds its task instead of filing a second one. NULL: created before 0007.
ALTER TABLE tasks ADD COLUMN request_key text;
CREATE UNIQUE INDEX tasks_by_request_key ON tasks (request_key) WHERE request_key IS NOT NULL;
