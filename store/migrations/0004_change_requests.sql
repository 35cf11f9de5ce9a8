-- Change requests: the workflow state of each request record, its frozen
-- proposals and its application receipt. The request's field values are the
-- record's own (its entity table and revisions); these tables hold only
-- what the workflow adds.
CREATE TABLE registrum.requests (
    entity_id        text        NOT NULL,
    record_id        uuid        NOT NULL,
    -- keyed reference of the principal that created the draft: the owner
    owner_reference  text        NOT NULL,
    state            text        NOT NULL CHECK (state IN ('draft', 'submitted', 'applied', 'cancelled')),
    proposal_version bigint      NOT NULL CHECK (proposal_version > 0),
    updated_at       timestamptz NOT NULL,
    PRIMARY KEY (entity_id, record_id)
);

-- One row per submitted proposal, frozen at submit and never re-planned.
-- plan is the canonical JSON of the frozen writes; it is null after an
-- operator erased the proposal detail.
CREATE TABLE registrum.request_proposals (
    entity_id           text        NOT NULL,
    record_id           uuid        NOT NULL,
    proposal_version    bigint      NOT NULL CHECK (proposal_version > 0),
    record_revision     bigint      NOT NULL CHECK (record_revision > 0),
    planner             text        NOT NULL,
    module_digest       text,
    effect_digest       text        NOT NULL CHECK (effect_digest ~ '^sha256:[0-9a-f]{64}$'),
    plan                jsonb,
    submitter_reference text        NOT NULL,
    submitter_actor     text        NOT NULL,
    submitted_at        timestamptz NOT NULL,
    detail_erased_at    timestamptz,
    PRIMARY KEY (entity_id, record_id, proposal_version),
    FOREIGN KEY (entity_id, record_id) REFERENCES registrum.requests (entity_id, record_id)
);

-- The application receipt: at most one per request, written in the same
-- transaction as the effects it applied.
CREATE TABLE registrum.request_applications (
    application_id    uuid        PRIMARY KEY,
    entity_id         text        NOT NULL,
    record_id         uuid        NOT NULL,
    proposal_version  bigint      NOT NULL,
    effect_digest     text        NOT NULL,
    applier_reference text        NOT NULL,
    applier_actor     text        NOT NULL,
    reason            text,
    reason_present    boolean     NOT NULL,
    results           jsonb       NOT NULL,
    applied_at        timestamptz NOT NULL,
    UNIQUE (entity_id, record_id),
    FOREIGN KEY (entity_id, record_id, proposal_version) REFERENCES registrum.request_proposals (entity_id, record_id, proposal_version)
);
