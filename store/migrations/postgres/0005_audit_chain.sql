-- 0005: on Postgres the audit chain lives in the store, so every process on every host
-- extends one chain. One row per line: its text exactly as hashed (and as mirrored to
-- .factory/audit.jsonl), with its sequence number, hash, task and time beside it for
-- paging and reading. A line is inserted in the transaction that applies its decision,
-- under the audit lock, and never changed: the primary key is the chain's order.

CREATE TABLE audit_chain (
    seq  bigint PRIMARY KEY CHECK (seq > 0),
    line text NOT NULL,
    hash text NOT NULL,
    task text,
    at   timestamptz NOT NULL
);

CREATE INDEX audit_chain_by_task ON audit_chain (task, seq);
