-- Events (docs/decisions/events.md, "Retries" in docs/events.md). The payload expiry of a pending or
-- dead-lettered delivery is a terminal move and is audited in the statement
-- that changes its state and erases its payload ("the terminal audit, state
-- change and payload erasure commit together"). Its operator is the engine
-- ('registrum'); its generation the delivery's at expiry.
ALTER TABLE registrum.event_delivery_audit DROP CONSTRAINT event_delivery_audit_action_check;
ALTER TABLE registrum.event_delivery_audit ADD CONSTRAINT event_delivery_audit_action_check
    CHECK (action IN ('replay', 'replay_refused', 'expired'));
-- The attempt audit keeps when the attempt after a failed one was scheduled
-- (the delivery's next_attempt_at is overwritten by the next attempt):
-- the schedule, its jitter and a receiver's Retry-After, as applied.
ALTER TABLE registrum.event_delivery_attempts ADD COLUMN next_attempt_at timestamptz;
-- Bulk replay selects dead letters by destination and capture time.
CREATE INDEX event_deliveries_dead_letters ON registrum.event_deliveries (destination_id, captured_at) WHERE state = 'dead_lettered';
