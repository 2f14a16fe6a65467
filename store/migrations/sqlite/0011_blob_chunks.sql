-- 0011: large artifacts in chunks.
--
-- A run's log may be tens of MiB. Content that large is written and read a chunk at a time
-- (1 MiB each, in order from n = 0), never held whole: its `blobs` row keeps its size, the
-- number of its chunks and an empty `content`; the chunks are in `blob_chunks`. A blob
-- with no chunks keeps its content in `blobs.content`, as before.
ALTER TABLE blobs ADD COLUMN chunks INTEGER NOT NULL DEFAULT 0;

CREATE TABLE blob_chunks (
    sha256  TEXT    NOT NULL REFERENCES blobs (sha256),
    n       INTEGER NOT NULL,
    content BLOB    NOT NULL,
    PRIMARY KEY (sha256, n)
) STRICT;
