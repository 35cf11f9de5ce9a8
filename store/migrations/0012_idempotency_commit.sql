-- The commit of each stored idempotent outcome, so that an operator's
-- erasure of retained history also erases the outcomes that hold the
-- erased values (docs/decisions/history-erasure.md): a replay of such a key
-- answers 410 idempotency.outcome_erased instead of the erased values.
ALTER TABLE registrum.idempotency ADD COLUMN commit_id uuid;
ALTER TABLE registrum.idempotency ADD COLUMN outcome_erased_at timestamptz;
CREATE INDEX idempotency_commit ON registrum.idempotency (commit_id) WHERE commit_id IS NOT NULL;
