-- Events: one delivery per captured event (a hook has exactly one handler),
-- inserted in the transaction of the write that caused it, with the exact
-- body to send (the canonical eight-member envelope) until the delivery ends.
-- Delivery states: pending (due at next_attempt_at), leased (an attempt is
-- being sent until lease_expires_at), delivered, dead_lettered (attempts
-- exhausted; payload kept until payload_expires_at for operator replay),
-- expired (payload gone; never replayable), failed (a local handler that
-- cannot run, e.g. captured under another module digest). The payload is
-- erased in the transaction that makes a delivery delivered, failed or
-- expired.
CREATE TABLE registrum.event_deliveries (
    delivery_id         uuid        PRIMARY KEY,
    event_id            uuid        NOT NULL UNIQUE,
    entity_id           text        NOT NULL,
    hook_id             text        NOT NULL,
    handler_kind        text        NOT NULL CHECK (handler_kind IN ('url', 'tengo', 'wasm')),
    -- url: the destination and the digest of its binding when captured;
    -- local handlers: the module digest the delivery is bound to.
    destination_id      text,
    binding_digest      text,
    module_digest       text,
    package_revision    text        NOT NULL,
    state               text        NOT NULL CHECK (state IN ('pending', 'leased', 'delivered', 'dead_lettered', 'expired', 'failed')),
    generation          integer     NOT NULL DEFAULT 1 CHECK (generation >= 1),
    attempt             integer     NOT NULL DEFAULT 0 CHECK (attempt >= 0),
    maximum_attempts    integer     NOT NULL CHECK (maximum_attempts BETWEEN 1 AND 20),
    retry_delays_ms     integer[]   NOT NULL,
    attempt_timeout_ms  integer     NOT NULL CHECK (attempt_timeout_ms BETWEEN 100 AND 10000),
    payload             bytea,
    payload_digest      text        NOT NULL,
    payload_expires_at  timestamptz NOT NULL,
    causation_hop       integer     NOT NULL CHECK (causation_hop >= 0),
    captured_at         timestamptz NOT NULL,
    next_attempt_at     timestamptz NOT NULL,
    lease_expires_at    timestamptz,
    updated_at          timestamptz NOT NULL,
    CHECK (state NOT IN ('delivered', 'expired', 'failed') OR payload IS NULL),
    CHECK (state NOT IN ('pending', 'leased') OR payload IS NOT NULL),
    CHECK ((handler_kind = 'url') = (destination_id IS NOT NULL AND binding_digest IS NOT NULL))
);
CREATE INDEX event_deliveries_due ON registrum.event_deliveries (next_attempt_at) WHERE state = 'pending';
CREATE INDEX event_deliveries_leased ON registrum.event_deliveries (lease_expires_at) WHERE state = 'leased';
CREATE INDEX event_deliveries_retained ON registrum.event_deliveries (payload_expires_at) WHERE payload IS NOT NULL;

-- The durable attempt audit: a row is committed before each send (outcome
-- NULL) and completed in the transaction that records the attempt's result.
-- Value-free: status codes and failure classes only.
CREATE TABLE registrum.event_delivery_attempts (
    delivery_id   uuid        NOT NULL REFERENCES registrum.event_deliveries (delivery_id),
    generation    integer     NOT NULL,
    attempt       integer     NOT NULL,
    started_at    timestamptz NOT NULL,
    delivery_time text        NOT NULL,
    outcome       text CHECK (outcome IN ('delivered', 'failed', 'lease_expired')),
    status_code   integer,
    failure       text,
    finished_at   timestamptz,
    PRIMARY KEY (delivery_id, generation, attempt)
);

-- Operator actions on deliveries (replay), value-free.
CREATE TABLE registrum.event_delivery_audit (
    id             bigserial   PRIMARY KEY,
    occurred_at    timestamptz NOT NULL DEFAULT now(),
    -- NULL when a refused replay named no retained delivery.
    delivery_id    uuid,
    action         text        NOT NULL CHECK (action IN ('replay', 'replay_refused')),
    generation     integer     NOT NULL,
    operator       text        NOT NULL
);
