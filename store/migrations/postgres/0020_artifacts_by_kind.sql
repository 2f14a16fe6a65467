-- 0020: a project's newest artifact of a kind, in one walk of an index.
--
-- The checks a merge kept (the baseline QA compares with) are found newest first among
-- the artifacts of their kind, however many other artifacts every task has written.
CREATE INDEX artifacts_by_kind ON artifacts (kind, id);
