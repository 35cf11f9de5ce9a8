-- Review application (docs/decisions/change-requests.md, "Review application states"):
-- the automatic application of a proposal, the review stage an authority
-- reports with its result, and how a revised proposal was revised.

-- One row per proposal whose automatic application was queued: written in
-- the transaction that queues the executor's apply job (the submit under
-- review mode none, the stored approval under an authority).
CREATE TABLE registrum.request_auto_applications (
    entity_id        text        NOT NULL,
    record_id        uuid        NOT NULL,
    proposal_version bigint      NOT NULL,
    -- queued: the apply job waits for a worker; applying: the executor's
    -- apply started (a passing failure keeps it here while it is retried);
    -- blocked: the apply was refused, an operator is needed (attention).
    state            text        NOT NULL CHECK (state IN ('queued', 'applying', 'blocked')),
    attention        text,
    attempts         integer     NOT NULL DEFAULT 0,
    created_at       timestamptz NOT NULL,
    updated_at       timestamptz NOT NULL,
    PRIMARY KEY (entity_id, record_id, proposal_version),
    FOREIGN KEY (entity_id, record_id, proposal_version) REFERENCES registrum.request_proposals (entity_id, record_id, proposal_version)
);

-- The review stage the authority reported with its result (null: none).
ALTER TABLE registrum.review_results ADD COLUMN stage text;

-- A proposal replaced by revise_request: a revision (rebase false) or a
-- rebase onto updated context (rebase true), and when.
ALTER TABLE registrum.request_proposals
    ADD COLUMN revised_as text CHECK (revised_as IN ('revision', 'rebase')),
    ADD COLUMN revised_at timestamptz;
