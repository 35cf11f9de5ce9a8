-- The engine's own tables. Entity tables live in schema registrum_data and are
-- created from the active package's layout (store/layout), not here.

CREATE TABLE registrum.package_state (
    singleton          boolean PRIMARY KEY DEFAULT true CHECK (singleton),
    schema_fingerprint text        NOT NULL,
    package_revision   text        NOT NULL,
    layout_ddl         text        NOT NULL,
    activated_at       timestamptz NOT NULL DEFAULT now()
);

-- Every write appends a revision; nothing in history is updated in place.
-- data holds the stored field values in their wire encoding, keyed by
-- authored field id.
CREATE TABLE registrum.revisions (
    entity_id        text        NOT NULL,
    record_id        uuid        NOT NULL,
    revision         bigint      NOT NULL CHECK (revision > 0),
    lifecycle        text        NOT NULL CHECK (lifecycle IN ('active', 'tombstoned')),
    data             jsonb       NOT NULL,
    package_revision text        NOT NULL,
    operation_id     uuid        NOT NULL,
    commit_id        uuid        NOT NULL,
    created_at       timestamptz NOT NULL,
    PRIMARY KEY (entity_id, record_id, revision)
);
CREATE INDEX revisions_commit ON registrum.revisions (commit_id);

-- Value-free journal of mutations: operation, outcome, keyed references and
-- the request's trace id, appended in the mutation's own transaction.
CREATE TABLE registrum.audit (
    id                  bigserial   PRIMARY KEY,
    occurred_at         timestamptz NOT NULL DEFAULT now(),
    operation           text        NOT NULL,
    outcome             text        NOT NULL,
    entity_id           text        NOT NULL,
    record_reference    text,
    revision            bigint,
    principal_reference text,
    trace_id            text        NOT NULL CHECK (trace_id ~ '^[0-9a-f]{32}$')
);
