-- 0007: doubled work is impossible by construction.
--
-- At most one queued or running run per task and stage. An enqueue that meets this
-- index finds the run already there instead of adding a second. Runs that already
-- doubled a stage keep the oldest; the others are cancelled first, or the index could
-- not be built.
UPDATE runs
SET status = 'cancelled', lease_expires_at = NULL,
    finished_at = ((julianday('now') - 2440587.5) * 86400.0),
    error = 'a second queued or running run of its stage, cancelled by migration 0007'
WHERE status IN ('queued', 'running') AND EXISTS (
    SELECT 1 FROM runs AS older
    WHERE older.task_id = runs.task_id AND older.stage = runs.stage
      AND older.status IN ('queued', 'running') AND older.id < runs.id
);
CREATE UNIQUE INDEX runs_one_active_per_stage ON runs (task_id, stage)
    WHERE status IN ('queued', 'running');

-- Fencing tokens are unique per claim across the store, not a per-run counter: a claim
-- takes the largest token any run holds, plus one (tokens only ever grow), found here.
CREATE INDEX runs_by_lease_token ON runs (lease_token);

-- The key of the claim that leased a run (Postgres finds a claim it retried by it).
ALTER TABLE runs ADD COLUMN claim_key TEXT;

-- The key a task's creation was written under (Postgres retries a write whose reply was
-- lost and finds its task by it; an embedded store has no lost replies). NULL: none.
ALTER TABLE tasks ADD COLUMN request_key TEXT;
CREATE UNIQUE INDEX tasks_by_request_key ON tasks (request_key) WHERE request_key IS NOT NULL;
