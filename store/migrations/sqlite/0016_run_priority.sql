-- 0016: the claim walks an index again, however long the queue.
--
-- The queue takes runs by their task's priority, then age. Reading the priority from
-- `tasks` at claim time joined and sorted every queued run before `LIMIT 1`, so a claim
-- grew with the backlog. Each run now carries its task's priority: written when it is
-- queued, kept equal to the task's by the trigger below whenever an edit changes it; the
-- partial index hands the claim the queued runs in the order it takes them.
ALTER TABLE runs ADD COLUMN priority INTEGER NOT NULL DEFAULT 0;
UPDATE runs SET priority = (SELECT priority FROM tasks WHERE tasks.id = runs.task_id);

DROP INDEX runs_claimable;
CREATE INDEX runs_claimable ON runs (priority DESC, id, not_before) WHERE status = 'queued';

CREATE TRIGGER runs_follow_task_priority AFTER UPDATE OF priority ON tasks
    WHEN OLD.priority IS NOT NEW.priority
BEGIN
    UPDATE runs SET priority = NEW.priority WHERE task_id = NEW.id;
END;
