-- The origin of the transaction ids that revisions record: the cluster
-- (its system identifier), the database (its oid) and the WAL timeline
-- they were handed out on. A store that opens the history under another
-- origin (a dump restored into another database or cluster, a
-- point-in-time recovery, a promoted replica that may have missed the last
-- commits) draws a new history tag, so that every snapshot token taken
-- under the old origin is refused instead of being read against a
-- transaction counter it does not belong to (docs/decisions/snapshot-reads.md).
-- NULL until the first start after this migration records it.
ALTER TABLE registrum.history_state ADD COLUMN origin text;
