-- 0019: a run's newest output, in one walk of an index.
--
-- The cockpit's log pane and `t25 logs --follow` open a run at its end: its last few
-- kilobytes, then older output as the operator scrolls up. Ordered by run then id, this
-- index hands over a run's newest events before any id, however long the run and however
-- many other runs its task had.
CREATE INDEX events_by_run ON events (run_id, id) WHERE run_id IS NOT NULL;
