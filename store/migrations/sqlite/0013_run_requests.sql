-- 0013: each model request's tokens, as the agent CLI reported them (a JSON array of
-- objects with the counts of a usage: input_tokens, output_tokens, cache_read_tokens,
-- cache_write_tokens, and the model when the CLI named one). A run's own columns keep its
-- total. '[]': none reported (a run before this migration, or a stage T25 runs itself).

ALTER TABLE runs ADD COLUMN requests TEXT NOT NULL DEFAULT '[]';
