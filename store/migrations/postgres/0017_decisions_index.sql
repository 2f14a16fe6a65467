-- 0017: the decisions that took effect, in one walk of an index.
--
-- `t25 audit verify` holds every audit line against the store's `DecisionRecorded` events.
-- It read them task by task, every event of each (its agents' output too) and kept the
-- decisions; this partial index hands it the decisions alone, in id order, a page at a time.
CREATE INDEX events_decisions ON events (id) WHERE kind = 'decision_recorded';
