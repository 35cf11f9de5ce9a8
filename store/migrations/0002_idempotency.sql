-- Idempotency keys: one row per (caller, key), holding the digest of the
-- request that first used it and, once that write committed, its outcome.
-- Only successful writes are stored; a refused write leaves no row.
CREATE TABLE registrum.idempotency (
    key_reference  text        PRIMARY KEY,
    request_digest text        NOT NULL,
    outcome        jsonb,
    created_at     timestamptz NOT NULL DEFAULT now()
);
