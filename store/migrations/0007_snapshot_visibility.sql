-- Snapshot visibility (docs/decisions/snapshot-reads.md): every revision
-- records the id of the transaction that wrote it, so that the state at a
-- snapshot token (a PostgreSQL snapshot) is "each record's latest revision
-- whose transaction the snapshot sees". No lock orders the writers.
-- Revisions written before this migration take the migration's own id.
ALTER TABLE registrum.revisions ADD COLUMN xid xid8 NOT NULL DEFAULT pg_current_xact_id();

-- One row: the tag that binds snapshot tokens to this history. A restore
-- that carries revisions written under another transaction counter is
-- rebased at start with a new tag, so that older tokens are refused.
CREATE TABLE registrum.history_state (
    singleton boolean PRIMARY KEY DEFAULT true CHECK (singleton),
    tag       bytea   NOT NULL CHECK (length(tag) = 8)
);
INSERT INTO registrum.history_state (tag) VALUES (substr(decode(md5(gen_random_uuid()::text), 'hex'), 1, 8));
