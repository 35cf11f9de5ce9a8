package store

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"math/rand/v2"
	"regexp"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/riverqueue/river"

	"github.com/registrum/registrum/model"
	"github.com/registrum/registrum/model/values"
)

// Change is one write an event may be captured for: a record created,
// patched or tombstoned, or a change request's lifecycle transition.
type Change struct {
	Entity *model.Entity
	// Trigger is model.TriggerCreated, TriggerPatched, TriggerTombstoned or
	// TriggerRequestLifecycle.
	Trigger string
	// Before is the record before the write (nil for a create); After the
	// record as written.
	Before, After *Record
	// Lifecycle describes a request transition (TriggerRequestLifecycle only).
	Lifecycle *Lifecycle
}

// Lifecycle is a change request's transition, as a lifecycle event reports it.
type Lifecycle struct {
	Transition, FromState, ToState string
	ProposalVersion                int64
	// Stage is the review stage, "" when none is known.
	Stage string
	// EffectDigest is the proposal's effect digest, "" for a draft.
	EffectDigest string
}

// A Capturer captures the events of a change inside the write's own
// transaction (package hooks implements it; Options.Capture gives it to
// the store). An error rolls the write back.
type Capturer interface {
	Capture(ctx context.Context, w *Writer, c Change) error
}

// capturing reports whether a change of e under trigger may capture events.
func (w *Writer) capturing(e *model.Entity, trigger string) bool {
	if w.s.capture == nil {
		return false
	}
	for _, h := range e.Hooks {
		if h.Trigger == trigger {
			return true
		}
	}
	return false
}

// Capture hands a change to the store's capturer, if any; request actions
// call it for their lifecycle transitions (record writes call it themselves).
func (w *Writer) Capture(ctx context.Context, c Change) error {
	if !w.capturing(c.Entity, c.Trigger) {
		return nil
	}
	if err := w.s.capture.Capture(ctx, w, c); err != nil {
		return fmt.Errorf("store: capture events: %w", err)
	}
	return nil
}

// Delivery states.
const (
	DeliveryPending      = "pending"
	DeliveryLeased       = "leased"
	DeliveryDelivered    = "delivered"
	DeliveryDeadLettered = "dead_lettered"
	DeliveryExpired      = "expired"
	DeliveryFailed       = "failed"
)

// Delivery is one captured event and the state of its delivery.
type Delivery struct {
	DeliveryID, EventID string
	EntityID, HookID    string
	// HandlerKind is url, tengo or wasm.
	HandlerKind string
	// DestinationID and BindingDigest bind a url delivery to its
	// destination; ModuleDigest binds a local handler's delivery.
	DestinationID, BindingDigest, ModuleDigest string
	PackageRevision                            string
	State                                      string
	Generation, Attempt, MaximumAttempts       int
	RetryDelaysMs                              []int32
	AttemptTimeoutMs                           int
	// Payload is the exact body; nil once erased.
	Payload          []byte
	PayloadDigest    string
	PayloadExpiresAt time.Time
	CausationHop     int
	CapturedAt       time.Time
	NextAttemptAt    time.Time
	LeaseExpiresAt   *time.Time
}

// DeliverEventArgs is the job of one delivery: it carries only the id.
type DeliverEventArgs struct {
	DeliveryID string `json:"deliveryId"`
}

// KindDeliverEvent is the job kind of a delivery attempt.
const KindDeliverEvent = "registrum.event.deliver"

// Kind implements river.JobArgs.
func (DeliverEventArgs) Kind() string { return KindDeliverEvent }

// InsertOpts puts deliveries in the queue of local handlers (QueueEvents);
// the store inserts a delivery to a destination in that destination's
// queue (EventQueue). A delivery job in the default queue (enqueued by a
// host of an earlier release) is worked there as before.
func (DeliverEventArgs) InsertOpts() river.InsertOpts { return river.InsertOpts{Queue: QueueEvents} }

// EventQueue returns the River queue of the deliveries to destinationID:
// QueueEvents for a local handler's (no destination), else a queue of the
// destination's own, so that a receiver that answers slowly, or not at
// all, holds only the workers of its own queue and never delays another
// destination's deliveries. That queue is "events-" followed by the
// destination's id, or, where that is no valid River queue name (over 64
// characters, or with two dashes in a row or a dash at the end), by the
// first 16 hex digits of the id's SHA-256.
func EventQueue(destinationID string) string {
	if destinationID == "" {
		return QueueEvents
	}
	if q := QueueEvents + "-" + destinationID; len(q) <= 64 && queueName.MatchString(q) {
		return q
	}
	sum := sha256.Sum256([]byte(destinationID))
	return QueueEvents + "-" + hex.EncodeToString(sum[:8])
}

// queueName is what River accepts as a queue's name.
var queueName = regexp.MustCompile(`^[a-z0-9]+(?:[_|-]?[a-z0-9]+)*$`)

// deliveryOpts are the insert options of a delivery job to destinationID:
// its destination's queue, scheduled at at (due at once when zero).
func deliveryOpts(destinationID string, at time.Time) *river.InsertOpts {
	return &river.InsertOpts{Queue: EventQueue(destinationID), ScheduledAt: at}
}

// enterDelivery waits for a free delivery statement (jobShare) and returns
// its release; it fails when ctx ends first.
func (s *Store) enterDelivery(ctx context.Context) (func(), error) {
	select {
	case s.deliveryStatements <- struct{}{}:
		return func() { <-s.deliveryStatements }, nil
	case <-ctx.Done():
		return nil, fmt.Errorf("store: wait for a delivery statement: %w", context.Cause(ctx))
	}
}

// InsertDelivery stores a captured event's delivery as pending, due now
// (queued in the write's pipeline), and enqueues its job, in the write's
// transaction.
func (w *Writer) InsertDelivery(ctx context.Context, d *Delivery) error {
	d.State, d.Generation, d.Attempt = DeliveryPending, 1, 0
	d.CapturedAt, d.NextAttemptAt = w.now, w.now
	w.send(nil, func(err error) error { return fmt.Errorf("store: capture delivery: %w", err) }, `INSERT INTO registrum.event_deliveries
    (delivery_id, event_id, entity_id, hook_id, handler_kind, destination_id, binding_digest, module_digest, package_revision,
     state, generation, attempt, maximum_attempts, retry_delays_ms, attempt_timeout_ms, payload, payload_digest, payload_expires_at,
     causation_hop, captured_at, next_attempt_at, updated_at)
    VALUES ($1, $2, $3, $4, $5, nullif($6, ''), nullif($7, ''), nullif($8, ''), $9, 'pending', 1, 0, $10, $11, $12, $13, $14, $15, $16, $17, $17, $17)`,
		d.DeliveryID, d.EventID, d.EntityID, d.HookID, d.HandlerKind, d.DestinationID, d.BindingDigest, d.ModuleDigest, d.PackageRevision,
		d.MaximumAttempts, d.RetryDelaysMs, d.AttemptTimeoutMs, d.Payload, d.PayloadDigest, d.PayloadExpiresAt, d.CausationHop, w.now)
	// The jobs of a transaction's deliveries are inserted together, once,
	// before it commits (Store.Write).
	w.deliveryJobs = append(w.deliveryJobs, river.InsertManyParams{Args: DeliverEventArgs{DeliveryID: d.DeliveryID}, InsertOpts: deliveryOpts(d.DestinationID, time.Time{})})
	return nil
}

// insertDeliveryJobs inserts the jobs of the deliveries captured in the
// transaction, in one statement.
func (w *Writer) insertDeliveryJobs(ctx context.Context) error {
	if len(w.deliveryJobs) == 0 {
		return nil
	}
	tx, err := w.direct(ctx)
	if err != nil {
		return err
	}
	if _, err := w.s.jobs.InsertManyTx(ctx, tx, w.deliveryJobs); err != nil {
		return fmt.Errorf("store: enqueue deliveries: %w", err)
	}
	return nil
}

const deliveryColumns = `delivery_id::text, event_id::text, entity_id, hook_id, handler_kind, coalesce(destination_id, ''), coalesce(binding_digest, ''),
    coalesce(module_digest, ''), package_revision, state, generation, attempt, maximum_attempts, retry_delays_ms, attempt_timeout_ms,
    payload, payload_digest, payload_expires_at, causation_hop, captured_at, next_attempt_at, lease_expires_at`

func scanDelivery(row pgx.Row) (*Delivery, error) {
	var d Delivery
	err := row.Scan(&d.DeliveryID, &d.EventID, &d.EntityID, &d.HookID, &d.HandlerKind, &d.DestinationID, &d.BindingDigest,
		&d.ModuleDigest, &d.PackageRevision, &d.State, &d.Generation, &d.Attempt, &d.MaximumAttempts, &d.RetryDelaysMs, &d.AttemptTimeoutMs,
		&d.Payload, &d.PayloadDigest, &d.PayloadExpiresAt, &d.CausationHop, &d.CapturedAt, &d.NextAttemptAt, &d.LeaseExpiresAt)
	if errors.Is(err, pgx.ErrNoRows) {
		return nil, ErrNotFound
	}
	if err != nil {
		return nil, fmt.Errorf("store: read delivery: %w", err)
	}
	return &d, nil
}

// Delivery reads one delivery.
func (s *Store) Delivery(ctx context.Context, id string) (_ *Delivery, err error) {
	ctx, span := startOp(ctx, spanRead, "Delivery")
	defer func() { endOp(span, err) }()
	return scanDelivery(s.pool.QueryRow(ctx, "SELECT "+deliveryColumns+" FROM registrum.event_deliveries WHERE delivery_id = $1", id))
}

// Lease is a claimed attempt: the delivery, its attempt number and the
// delivery time written in the attempt audit before the send.
type Lease struct {
	*Delivery
	DeliveryTime time.Time
}

// ClaimDelivery leases a due pending delivery for one attempt: it counts
// the attempt, sets the lease (attempt timeout plus grace) and commits the
// attempt audit, in one statement, before returning, so the audit precedes
// the send. It returns nil when the delivery is not pending and due
// (delivered, leased by another worker, or not yet due): the caller then
// has nothing to do. Two claims of one delivery serialise on its row; the
// second finds it leased. Claims and settlements (FinishAttempt) of the
// process run at most a quarter of the pool's connections at once (at
// least one); the others wait for their turn without a connection.
func (s *Store) ClaimDelivery(ctx context.Context, id string, grace time.Duration) (_ *Lease, err error) {
	ctx, span := startOp(ctx, spanTx, "ClaimDelivery")
	defer func() { endOp(span, err) }()
	leave, err := s.enterDelivery(ctx)
	if err != nil {
		return nil, err
	}
	defer leave()
	now := time.Now().UTC().Truncate(time.Millisecond)
	d, err := scanDelivery(s.pool.QueryRow(ctx, `WITH d AS (
    UPDATE registrum.event_deliveries SET state = 'leased', attempt = attempt + 1,
        lease_expires_at = now() + make_interval(secs => ($2::double precision + attempt_timeout_ms) / 1000), updated_at = now()
    WHERE delivery_id = $1 AND state = 'pending' AND next_attempt_at <= now()
    RETURNING *
), a AS (
    INSERT INTO registrum.event_delivery_attempts (delivery_id, generation, attempt, started_at, delivery_time)
    SELECT delivery_id, generation, attempt, $3, $4 FROM d
)
SELECT `+deliveryColumns+` FROM d`, id, float64(grace.Milliseconds()), now, FormatTime(now)))
	if errors.Is(err, ErrNotFound) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("store: lease delivery: %w", err)
	}
	return &Lease{Delivery: d, DeliveryTime: now}, nil
}

// FormatTime is the wire form of event times: RFC 3339 in UTC with
// milliseconds.
func FormatTime(t time.Time) string { return t.UTC().Format("2006-01-02T15:04:05.000Z") }

// AttemptResult is how one attempt ended.
type AttemptResult struct {
	// Delivered is true for a 2xx answer (or a local handler that ran).
	Delivered bool
	// StatusCode is the receiver's status, 0 when none was received.
	StatusCode int
	// Failure classifies a failed attempt (status, redirect, transport,
	// timeout, or a local handler's failure category), value-free.
	Failure string
	// Final ends the delivery as failed without further attempts (a local
	// handler that can never run).
	Final bool
	// Stop dead-letters the delivery at once, its payload retained for
	// replay (a receiver answering 410 Gone).
	Stop bool
	// RetryAfter is the pause the receiver asked for (Retry-After), 0 when
	// none: the next attempt waits for it within the schedule's bounds
	// (model.RetryDelay).
	RetryAfter time.Duration
}

// FinishAttempt records an attempt's result: it completes the attempt
// audit and moves the delivery in one transaction. Delivered erases the
// payload; a failure with attempts left schedules the next attempt (and
// its job) after the delay of the compiled schedule (model.RetryDelay:
// step, jitter and the receiver's Retry-After), computed now and stored as
// next_attempt_at; otherwise, or when the result stops retrying, the
// delivery is dead lettered (its payload retained for replay until it
// expires), or failed with its payload erased when the result is final. It returns the new
// state. A lease that is no longer held (reaped meanwhile) changes nothing
// and returns "". It waits for its turn as ClaimDelivery does.
func (s *Store) FinishAttempt(ctx context.Context, l *Lease, r AttemptResult) (_ string, err error) {
	ctx, span := startOp(ctx, spanTx, "FinishAttempt")
	defer func() { endOp(span, err) }()
	leave, err := s.enterDelivery(ctx)
	if err != nil {
		return "", err
	}
	defer leave()
	if r.Delivered {
		// The common case in one statement: audit, state and erasure.
		tag, err := s.pool.Exec(ctx, `WITH d AS (
    UPDATE registrum.event_deliveries SET state = 'delivered', payload = NULL, lease_expires_at = NULL, updated_at = now()
    WHERE delivery_id = $1 AND state = 'leased' AND generation = $2 AND attempt = $3 RETURNING delivery_id
)
UPDATE registrum.event_delivery_attempts SET outcome = 'delivered', status_code = nullif($4, 0), finished_at = now()
WHERE delivery_id = $1 AND generation = $2 AND attempt = $3 AND EXISTS (SELECT 1 FROM d)`, l.DeliveryID, l.Generation, l.Attempt, r.StatusCode)
		if err != nil {
			return "", fmt.Errorf("store: finish attempt: %w", err)
		}
		if tag.RowsAffected() == 0 {
			return "", nil
		}
		return DeliveryDelivered, nil
	}
	var state string
	err = pgx.BeginFunc(ctx, s.pool, func(tx pgx.Tx) error {
		var ok bool
		err := tx.QueryRow(ctx, `SELECT true FROM registrum.event_deliveries
    WHERE delivery_id = $1 AND state = 'leased' AND generation = $2 AND attempt = $3 FOR UPDATE`, l.DeliveryID, l.Generation, l.Attempt).Scan(&ok)
		if errors.Is(err, pgx.ErrNoRows) {
			return nil
		}
		if err != nil {
			return fmt.Errorf("store: finish attempt: %w", err)
		}
		outcome := "failed"
		if r.Delivered {
			outcome = "delivered"
		}
		state, err = s.settle(ctx, tx, l.Delivery, outcome, r)
		return err
	})
	return state, err
}

// settle completes the attempt audit of l's current attempt and moves the
// delivery (the caller holds its row lock).
func (s *Store) settle(ctx context.Context, tx pgx.Tx, d *Delivery, outcome string, r AttemptResult) (string, error) {
	if _, err := tx.Exec(ctx, `UPDATE registrum.event_delivery_attempts SET outcome = $4, status_code = nullif($5, 0), failure = nullif($6, ''), finished_at = now()
    WHERE delivery_id = $1 AND generation = $2 AND attempt = $3`, d.DeliveryID, d.Generation, d.Attempt, outcome, r.StatusCode, r.Failure); err != nil {
		return "", fmt.Errorf("store: attempt audit: %w", err)
	}
	switch {
	case r.Delivered:
		_, err := tx.Exec(ctx, `UPDATE registrum.event_deliveries SET state = 'delivered', payload = NULL, lease_expires_at = NULL, updated_at = now()
    WHERE delivery_id = $1`, d.DeliveryID)
		return DeliveryDelivered, wrap("deliver", err)
	case r.Final:
		_, err := tx.Exec(ctx, `UPDATE registrum.event_deliveries SET state = 'failed', payload = NULL, lease_expires_at = NULL, updated_at = now()
    WHERE delivery_id = $1`, d.DeliveryID)
		return DeliveryFailed, wrap("fail delivery", err)
	case d.Attempt < d.MaximumAttempts && !r.Stop:
		delay := model.RetryDelay(d.RetryDelaysMs, d.Attempt, r.RetryAfter, rand.Float64())
		var next time.Time
		if err := tx.QueryRow(ctx, `UPDATE registrum.event_deliveries SET state = 'pending', lease_expires_at = NULL,
    next_attempt_at = now() + make_interval(secs => $2::double precision / 1000), updated_at = now()
    WHERE delivery_id = $1 RETURNING next_attempt_at`, d.DeliveryID, float64(delay.Milliseconds())).Scan(&next); err != nil {
			return "", wrap("schedule retry", err)
		}
		if _, err := tx.Exec(ctx, `UPDATE registrum.event_delivery_attempts SET next_attempt_at = $4
    WHERE delivery_id = $1 AND generation = $2 AND attempt = $3`, d.DeliveryID, d.Generation, d.Attempt, next); err != nil {
			return "", wrap("schedule retry", err)
		}
		if _, err := s.jobs.InsertTx(ctx, tx, DeliverEventArgs{DeliveryID: d.DeliveryID}, deliveryOpts(d.DestinationID, next)); err != nil {
			return "", wrap("schedule retry", err)
		}
		return DeliveryPending, nil
	default:
		_, err := tx.Exec(ctx, `UPDATE registrum.event_deliveries SET state = 'dead_lettered', lease_expires_at = NULL, updated_at = now()
    WHERE delivery_id = $1`, d.DeliveryID)
		return DeliveryDeadLettered, wrap("dead letter", err)
	}
}

func wrap(what string, err error) error {
	if err != nil {
		return fmt.Errorf("store: %s: %w", what, err)
	}
	return nil
}

// ReapLeases ends the attempts whose lease expired (their worker died or
// hung): each counts as a failed attempt ("lease_expired") and the
// delivery moves on as after any failure. It returns how many it reaped.
func (s *Store) ReapLeases(ctx context.Context) (_ int, err error) {
	ctx, span := startOp(ctx, spanTx, "ReapLeases")
	defer func() { endOp(span, err) }()
	n := 0
	err = pgx.BeginFunc(ctx, s.pool, func(tx pgx.Tx) error {
		rows, err := tx.Query(ctx, "SELECT "+deliveryColumns+` FROM registrum.event_deliveries
    WHERE state = 'leased' AND lease_expires_at < now() ORDER BY lease_expires_at LIMIT 1000 FOR UPDATE SKIP LOCKED`)
		if err != nil {
			return fmt.Errorf("store: reap leases: %w", err)
		}
		ds, err := pgx.CollectRows(rows, func(r pgx.CollectableRow) (*Delivery, error) { return scanDelivery(r) })
		if err != nil {
			return err
		}
		for _, d := range ds {
			if _, err := s.settle(ctx, tx, d, "lease_expired", AttemptResult{Failure: "lease_expired"}); err != nil {
				return err
			}
		}
		n = len(ds)
		return nil
	})
	return n, err
}

// ExpirePayloads erases the retained payloads past their expiry: pending
// and dead-lettered deliveries become expired (never replayable). The
// terminal audit (an "expired" row of the delivery audit, under operator
// ExpiryOperator), the state change and the erasure commit together, in
// one statement. It returns how many it expired.
func (s *Store) ExpirePayloads(ctx context.Context) (_ int64, err error) {
	ctx, span := startOp(ctx, spanTx, "ExpirePayloads")
	defer func() { endOp(span, err) }()
	tag, err := s.pool.Exec(ctx, `WITH d AS (
    UPDATE registrum.event_deliveries SET state = 'expired', payload = NULL, lease_expires_at = NULL, updated_at = now()
    WHERE payload IS NOT NULL AND payload_expires_at <= now() AND state IN ('pending', 'dead_lettered')
    RETURNING delivery_id, generation
)
INSERT INTO registrum.event_delivery_audit (delivery_id, action, generation, operator)
SELECT delivery_id, 'expired', generation, $1 FROM d`, ExpiryOperator)
	if err != nil {
		return 0, fmt.Errorf("store: expire payloads: %w", err)
	}
	return tag.RowsAffected(), nil
}

// ExpiryOperator is the operator name of the engine's own terminal audit
// entries (payload expiry).
const ExpiryOperator = "registrum"

// Binding is a destination binding that retained nonterminal work
// (pending or leased deliveries) depends on.
type Binding struct {
	DestinationID, BindingDigest string
	Deliveries                   int64
}

// PendingBindings lists the destination bindings of pending and leased
// url deliveries: a host whose destinations no longer match one of them
// would strand that work.
func (s *Store) PendingBindings(ctx context.Context) (_ []Binding, err error) {
	ctx, span := startOp(ctx, spanRead, "PendingBindings")
	defer func() { endOp(span, err) }()
	rows, err := s.pool.Query(ctx, `SELECT destination_id, binding_digest, count(*) FROM registrum.event_deliveries
    WHERE state IN ('pending', 'leased') AND handler_kind = 'url' GROUP BY 1, 2 ORDER BY 1, 2`)
	if err != nil {
		return nil, fmt.Errorf("store: pending bindings: %w", err)
	}
	return pgx.CollectRows(rows, func(r pgx.CollectableRow) (Binding, error) {
		var b Binding
		err := r.Scan(&b.DestinationID, &b.BindingDigest, &b.Deliveries)
		return b, err
	})
}

// DeliverySummary is one line of the operator's delivery list: identifiers
// and states, never values.
type DeliverySummary struct {
	EventID          string     `json:"eventId"`
	DeliveryID       string     `json:"deliveryId"`
	Entity           string     `json:"entity"`
	Hook             string     `json:"hook"`
	Handler          string     `json:"handler"`
	Destination      string     `json:"destination,omitempty"`
	Generation       int        `json:"generation"`
	State            string     `json:"state"`
	Attempt          int        `json:"attempt"`
	PayloadAvailable bool       `json:"payloadAvailable"`
	PayloadExpiresAt time.Time  `json:"payloadExpiresAt"`
	NextAttemptAt    *time.Time `json:"nextAttemptAt,omitempty"`
	CapturedAt       time.Time  `json:"capturedAt"`
}

// MaxDeliveryList bounds one delivery list.
const MaxDeliveryList = 100

// ListDeliveries lists the latest deliveries, newest first, in one state
// when state is not "".
func (s *Store) ListDeliveries(ctx context.Context, state string, limit int) (_ []DeliverySummary, err error) {
	ctx, span := startOp(ctx, spanRead, "ListDeliveries")
	defer func() { endOp(span, err) }()
	rows, err := s.pool.Query(ctx, `SELECT event_id::text, delivery_id::text, entity_id, hook_id, handler_kind, coalesce(destination_id, ''),
    generation, state, attempt, payload IS NOT NULL, payload_expires_at, CASE WHEN state = 'pending' THEN next_attempt_at END, captured_at
    FROM registrum.event_deliveries WHERE ($1 = '' OR state = $1) ORDER BY captured_at DESC, delivery_id LIMIT $2`, state, limit)
	if err != nil {
		return nil, fmt.Errorf("store: list deliveries: %w", err)
	}
	return pgx.CollectRows(rows, func(r pgx.CollectableRow) (DeliverySummary, error) {
		var d DeliverySummary
		err := r.Scan(&d.EventID, &d.DeliveryID, &d.Entity, &d.Hook, &d.Handler, &d.Destination, &d.Generation, &d.State, &d.Attempt,
			&d.PayloadAvailable, &d.PayloadExpiresAt, &d.NextAttemptAt, &d.CapturedAt)
		return d, err
	})
}

// ErrReplayRefused is every refusal of a replay: the message says nothing
// about which condition failed.
var ErrReplayRefused = errors.New("the delivery is unavailable for replay")

// Replay reopens a dead letter as the next generation: only a
// dead-lettered delivery of eventID and deliveryID at expectedGeneration,
// with its payload retained and unexpired, whose destination binding is
// bindings[destination] (nil for a local handler's delivery: its module
// digest must be modules[hook]). It resets the attempt count, makes the
// delivery due now, enqueues its job, and audits the replay (or the
// refusal) under operator. It returns the new generation.
func (s *Store) Replay(ctx context.Context, eventID, deliveryID string, expectedGeneration int, bindings, modules map[string]string, operator string) (_ int, err error) {
	ctx, span := startOp(ctx, spanTx, "Replay")
	defer func() { endOp(span, err) }()
	var gen int
	refused := false
	err = pgx.BeginFunc(ctx, s.pool, func(tx pgx.Tx) error {
		var d *Delivery
		err := ErrNotFound
		if values.IsUUID(eventID) && values.IsUUID(deliveryID) {
			d, err = scanDelivery(tx.QueryRow(ctx, "SELECT "+deliveryColumns+` FROM registrum.event_deliveries
    WHERE delivery_id = $1 AND event_id = $2 FOR UPDATE`, deliveryID, eventID))
		}
		if errors.Is(err, ErrNotFound) {
			refused = true
			_, err := tx.Exec(ctx, `INSERT INTO registrum.event_delivery_audit (delivery_id, action, generation, operator) VALUES (NULL, 'replay_refused', $1, $2)`,
				expectedGeneration, operator)
			return wrap("audit replay", err)
		}
		if err != nil {
			return err
		}
		var now time.Time
		if err := tx.QueryRow(ctx, "SELECT now()").Scan(&now); err != nil {
			return err
		}
		if d.Generation != expectedGeneration || !replayable(d, now, bindings, modules) {
			refused = true
			_, err := tx.Exec(ctx, `INSERT INTO registrum.event_delivery_audit (delivery_id, action, generation, operator) VALUES ($1, 'replay_refused', $2, $3)`,
				d.DeliveryID, d.Generation, operator)
			return wrap("audit replay", err)
		}
		gen = d.Generation + 1
		if _, err := tx.Exec(ctx, `UPDATE registrum.event_deliveries SET state = 'pending', generation = $2, attempt = 0, next_attempt_at = now(), updated_at = now()
    WHERE delivery_id = $1`, d.DeliveryID, gen); err != nil {
			return wrap("replay", err)
		}
		if _, err := tx.Exec(ctx, `INSERT INTO registrum.event_delivery_audit (delivery_id, action, generation, operator) VALUES ($1, 'replay', $2, $3)`,
			d.DeliveryID, gen, operator); err != nil {
			return wrap("audit replay", err)
		}
		_, err = s.jobs.InsertTx(ctx, tx, DeliverEventArgs{DeliveryID: d.DeliveryID}, deliveryOpts(d.DestinationID, time.Time{}))
		return wrap("replay", err)
	})
	if err != nil {
		return 0, err
	}
	if refused {
		return 0, ErrReplayRefused
	}
	return gen, nil
}

// replayable reports whether d may be replayed at now: a dead letter with
// its payload retained and unexpired, bound as when it was captured (its
// destination binding in bindings, or for a local handler its module
// digest in modules).
func replayable(d *Delivery, now time.Time, bindings, modules map[string]string) bool {
	return d.State == DeliveryDeadLettered && d.Payload != nil && d.PayloadExpiresAt.After(now) && d.boundIn(bindings, modules)
}

// boundIn reports whether d is bound as when it was captured: its
// destination binding is in bindings, or for a local handler its module
// digest in modules.
func (d *Delivery) boundIn(bindings, modules map[string]string) bool {
	if d.HandlerKind == model.HandlerURL {
		return bindings[d.DestinationID] != "" && bindings[d.DestinationID] == d.BindingDigest
	}
	return modules[d.HookID] != "" && modules[d.HookID] == d.ModuleDigest
}

// DeliveryAttempt is one row of the attempt audit.
type DeliveryAttempt struct {
	Generation, Attempt int
	DeliveryTime        string
	Outcome             string
	StatusCode          int
	Failure             string
	// NextAttemptAt is when the attempt after this failed one was
	// scheduled; nil when none was (delivered, dead-lettered, failed, or
	// not finished).
	NextAttemptAt *time.Time
}

// DeliveryAttempts returns the attempt audit of a delivery in order.
func (s *Store) DeliveryAttempts(ctx context.Context, deliveryID string) (_ []DeliveryAttempt, err error) {
	ctx, span := startOp(ctx, spanRead, "DeliveryAttempts")
	defer func() { endOp(span, err) }()
	rows, err := s.pool.Query(ctx, `SELECT generation, attempt, delivery_time, coalesce(outcome, ''), coalesce(status_code, 0), coalesce(failure, ''),
    next_attempt_at FROM registrum.event_delivery_attempts WHERE delivery_id = $1 ORDER BY generation, attempt`, deliveryID)
	if err != nil {
		return nil, fmt.Errorf("store: delivery attempts: %w", err)
	}
	return pgx.CollectRows(rows, func(r pgx.CollectableRow) (DeliveryAttempt, error) {
		var a DeliveryAttempt
		err := r.Scan(&a.Generation, &a.Attempt, &a.DeliveryTime, &a.Outcome, &a.StatusCode, &a.Failure, &a.NextAttemptAt)
		return a, err
	})
}

// ForOperator opens the store for operator commands on deliveries: it
// checks the schema version but activates no package.
func ForOperator(ctx context.Context, pool *pgxpool.Pool) (*Store, error) {
	if err := CheckSchema(ctx, pool); err != nil {
		return nil, err
	}
	jobs, err := newInserter(pool)
	if err != nil {
		return nil, err
	}
	return &Store{pool: pool, jobs: jobs}, nil
}
