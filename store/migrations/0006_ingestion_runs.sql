-- Ingestion runs: a client-driven bulk import that advances one chunk at a
-- time. A run binds the package revision and schema fingerprint active at
-- its creation; "blocked" is derived at read time (an open run whose binding
-- is no longer the active package's), never stored.
CREATE TABLE registrum.ingestion_runs (
    run_id                   uuid        PRIMARY KEY,
    principal_reference      text        NOT NULL,
    entity_id                text        NOT NULL,
    operation                text        NOT NULL CHECK (operation IN ('create', 'patch')),
    profile_id               text        NOT NULL,
    package_revision         text        NOT NULL,
    schema_fingerprint       text        NOT NULL,
    input_digest             text        NOT NULL CHECK (input_digest ~ '^[0-9a-f]{64}$'),
    input_length             bigint      NOT NULL CHECK (input_length >= 0),
    item_count               bigint      NOT NULL CHECK (item_count >= 1),
    chunk_count              bigint      NOT NULL CHECK (chunk_count >= 1 AND chunk_count <= item_count),
    chunk_algorithm_version  text        NOT NULL,
    maximum_items            bigint      NOT NULL,
    maximum_bytes            bigint      NOT NULL,
    -- open, complete or cancelled; blocked is derived
    status                   text        NOT NULL CHECK (status IN ('open', 'complete', 'cancelled')),
    next_chunk_index         bigint      NOT NULL DEFAULT 0,
    committed_items          bigint      NOT NULL DEFAULT 0,
    committed_prefix_digest  text        NOT NULL,
    last_attempt_outcome     text CHECK (last_attempt_outcome IN ('committed', 'replayed', 'invalidItem', 'refused', 'bindingChanged', 'chunkMismatch', 'runNotOpen', 'unavailable')),
    last_attempt_chunk_index bigint,
    created_at               timestamptz NOT NULL,
    updated_at               timestamptz NOT NULL
);

-- A caller's runs of one entity, in creation order (run ids are UUIDv7).
CREATE INDEX ingestion_runs_owner ON registrum.ingestion_runs (principal_reference, entity_id, run_id);

-- One row per committed chunk, written in the chunk's transaction with its
-- records, revisions and audit entries; the receipt is the exact batch
-- response, returned again on replay.
CREATE TABLE registrum.ingestion_run_chunks (
    run_id        uuid        NOT NULL REFERENCES registrum.ingestion_runs (run_id),
    chunk_index   bigint      NOT NULL CHECK (chunk_index >= 0),
    chunk_digest  text        NOT NULL CHECK (chunk_digest ~ '^[0-9a-f]{64}$'),
    prefix_digest text        NOT NULL CHECK (prefix_digest ~ '^[0-9a-f]{64}$'),
    item_count    bigint      NOT NULL,
    end_item      bigint      NOT NULL,
    commit_id     uuid        NOT NULL,
    receipt       bytea,
    erased_at     timestamptz,
    created_at    timestamptz NOT NULL,
    PRIMARY KEY (run_id, chunk_index)
);
