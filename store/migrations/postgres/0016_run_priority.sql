-- 0016: the claim walks an index again, however long the queue.
--
-- The queue takes runs by their task's priority, then age. Reading the priority from
-- `tasks` at claim time joined and sorted every queued run before `LIMIT 1`, so a claim
-- grew with the backlog. Each run now carries its task's priority: written when it is
-- queued, kept equal to the task's by the trigger below whenever an edit changes it; the
-- partial index hands the claim the queued runs in the order it takes them.
ALTER TABLE runs ADD COLUMN priority integer NOT NULL DEFAULT 0;
UPDATE runs SET priority = tasks.priority FROM tasks
WHERE tasks.id = runs.task_id AND runs.priority <> tasks.priority;

DROP INDEX runs_claimable;
CREATE INDEX runs_claimable ON runs (priority DESC, id) INCLUDE (not_before)
    WHERE status = 'queued';

CREATE FUNCTION runs_follow_task_priority() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    UPDATE runs SET priority = NEW.priority WHERE task_id = NEW.id AND priority <> NEW.priority;
    RETURN NULL;
END $$;
CREATE TRIGGER runs_follow_task_priority AFTER UPDATE OF priority ON tasks
    FOR EACH ROW WHEN (OLD.priority IS DISTINCT FROM NEW.priority)
    EXECUTE FUNCTION runs_follow_task_priority();
