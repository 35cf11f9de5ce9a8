-- The external review authority: one submission per submitted proposal of a
-- request whose review mode is authority, written in the submit transaction
-- and sent after commit by a job; the result the authority settled, pulled
-- and stored when it is known.
CREATE TABLE registrum.review_submissions (
    entity_id         text        NOT NULL,
    record_id         uuid        NOT NULL,
    proposal_version  bigint      NOT NULL,
    authority         text        NOT NULL,
    policy_id         text        NOT NULL,
    -- pending: not yet accepted; accepted: the authority holds it;
    -- uncertain: a send whose answer was lost; cancelling, cancelled; failed.
    state             text        NOT NULL CHECK (state IN ('pending', 'accepted', 'uncertain', 'cancelling', 'cancelled', 'failed')),
    -- the exact body sent, and the SHA-256 of its canonical form, which the
    -- authority must echo in its result
    body              jsonb       NOT NULL,
    submission_digest text        NOT NULL CHECK (submission_digest ~ '^sha256:[0-9a-f]{64}$'),
    -- known once accepted
    request_id        text,
    policy_version    text,
    policy_digest     text,
    -- the result feed: polling, received, unmatched (a result that did not
    -- match exactly), exhausted (gave up before the recovery deadline)
    delivery_state    text        NOT NULL DEFAULT 'polling' CHECK (delivery_state IN ('polling', 'received', 'unmatched', 'exhausted')),
    attempts          integer     NOT NULL DEFAULT 0,
    -- set when the request cannot proceed without an operator (a refused
    -- submission, a result that did not match, a refused automatic apply)
    attention         text,
    recovery_deadline timestamptz NOT NULL,
    created_at        timestamptz NOT NULL,
    updated_at        timestamptz NOT NULL,
    PRIMARY KEY (entity_id, record_id, proposal_version),
    FOREIGN KEY (entity_id, record_id, proposal_version) REFERENCES registrum.request_proposals (entity_id, record_id, proposal_version)
);

CREATE TABLE registrum.review_results (
    entity_id        text        NOT NULL,
    record_id        uuid        NOT NULL,
    proposal_version bigint      NOT NULL,
    result_id        text        NOT NULL,
    status           text        NOT NULL CHECK (status IN ('approved', 'rejected', 'changesRequested', 'answered', 'cancelled', 'superseded')),
    completed_at     timestamptz NOT NULL,
    available_until  timestamptz,
    body             jsonb       NOT NULL,
    received_at      timestamptz NOT NULL,
    PRIMARY KEY (entity_id, record_id, proposal_version),
    FOREIGN KEY (entity_id, record_id, proposal_version) REFERENCES registrum.review_submissions (entity_id, record_id, proposal_version)
);
