-- Attachments of change requests: content kept by SHA-256 in chunk rows
-- (streamed in and out, never one value), the slots of each proposal
-- version, and the verdicts of verifiers by exact content, media type and
-- verification policy.

-- One row per stored content. sha256 is null while the content is being
-- streamed in (the row and its chunks are then uncommitted); a committed
-- row always has its hash and size.
CREATE TABLE registrum.attachment_blobs (
    blob_id     bigserial   PRIMARY KEY,
    sha256      text        UNIQUE CHECK (sha256 ~ '^[0-9a-f]{64}$'),
    byte_size   bigint      NOT NULL DEFAULT 0 CHECK (byte_size >= 0),
    created_at  timestamptz NOT NULL DEFAULT now()
);

-- The content in order; each chunk carries its own SHA-256 so a download
-- verifies every chunk before sending it.
CREATE TABLE registrum.attachment_chunks (
    blob_id      bigint NOT NULL REFERENCES registrum.attachment_blobs (blob_id) ON DELETE CASCADE,
    seq          int    NOT NULL CHECK (seq >= 0),
    chunk_sha256 bytea  NOT NULL,
    bytes        bytea  NOT NULL,
    PRIMARY KEY (blob_id, seq)
);
-- Attachments are mostly compressed formats: do not try to compress them again.
ALTER TABLE registrum.attachment_chunks ALTER COLUMN bytes SET STORAGE EXTERNAL;

-- The filled slots of each proposal version of a request. Erasure keeps
-- slot id, proposal version, size and hash and clears the rest.
CREATE TABLE registrum.request_attachments (
    entity_id        text        NOT NULL,
    record_id        uuid        NOT NULL,
    proposal_version bigint      NOT NULL CHECK (proposal_version > 0),
    slot_id          text        NOT NULL,
    sha256           text        NOT NULL CHECK (sha256 ~ '^[0-9a-f]{64}$'),
    byte_size        bigint      NOT NULL CHECK (byte_size > 0),
    content_type     text,
    uploaded_at      timestamptz,
    uploaded_by      text,
    -- digest of the verification policy the upload is checked under; null
    -- when the slot has no verification (status notRequired)
    policy_digest    text,
    erased_at        timestamptz,
    PRIMARY KEY (entity_id, record_id, proposal_version, slot_id),
    FOREIGN KEY (entity_id, record_id) REFERENCES registrum.requests (entity_id, record_id)
);
CREATE INDEX request_attachments_sha256 ON registrum.request_attachments (sha256);

-- Verdicts, shared by every slot holding the same content, media type and
-- policy. A pending row is worked by the verification job under a durable
-- lease.
CREATE TABLE registrum.attachment_verifications (
    sha256           text        NOT NULL CHECK (sha256 ~ '^[0-9a-f]{64}$'),
    content_type     text        NOT NULL,
    policy_digest    text        NOT NULL,
    verifier         text        NOT NULL,
    entity_id        text        NOT NULL,
    slot_id          text        NOT NULL,
    byte_size        bigint      NOT NULL,
    verdict          text        NOT NULL CHECK (verdict IN ('pending', 'approved', 'rejected')),
    attempts         int         NOT NULL DEFAULT 0,
    lease_id         uuid,
    lease_expires_at timestamptz,
    created_at       timestamptz NOT NULL,
    decided_at       timestamptz,
    PRIMARY KEY (sha256, content_type, policy_digest)
);

-- The slot manifest frozen with a submitted proposal (canonical JSON).
ALTER TABLE registrum.request_proposals ADD COLUMN attachments jsonb;
