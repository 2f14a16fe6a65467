-- 0014: the agent CLI's session of a run.
--
-- A QA or review send-back may continue the last dev run's CLI session rather than start a
-- fresh one (a profile's `resume: true`). A run keeps the session it took place in, as its
-- CLI reported it, and the session it continued (NULL: it began a fresh one).
ALTER TABLE runs ADD COLUMN session_id TEXT;
ALTER TABLE runs ADD COLUMN resumed_session TEXT;
