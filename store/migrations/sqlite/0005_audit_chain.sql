-- 0005: on Postgres the audit chain moved into the store (audit_chain). An embedded
-- SQLite store is one checkout's, so its log file .factory/audit.jsonl stays the chain,
-- anchored in audit_anchor as before: nothing changes here. The id is kept so that both
-- dialects tell one history.

SELECT 1;
