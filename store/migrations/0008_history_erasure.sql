-- Operator erasure of retained history (docs/decisions/history-erasure.md):
-- an erased revision keeps its place (entity, record, revision, lifecycle,
-- commit, transaction) and loses its stored values and change context.
ALTER TABLE registrum.revisions ADD COLUMN erased_at timestamptz;

-- One row per erasure: what was erased and the transactions that wrote it.
-- A snapshot that sees any of these transactions is at or after the
-- earliest erased commit and is no longer available.
CREATE TABLE registrum.history_erasures (
    id            bigserial   PRIMARY KEY,
    entity_id     text        NOT NULL,
    record_id     uuid        NOT NULL,
    before_commit uuid        NOT NULL,
    revisions     bigint      NOT NULL CHECK (revisions > 0),
    xids          xid8[]      NOT NULL,
    commit_ids    uuid[]      NOT NULL,
    erased_at     timestamptz NOT NULL DEFAULT now(),
    trace_id      text        NOT NULL CHECK (trace_id ~ '^[0-9a-f]{32}$')
);
