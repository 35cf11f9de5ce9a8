package store

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/riverqueue/river"
)

// ReplayFilter selects the dead letters a bulk replay reopens: the url
// deliveries of one destination captured in a time window.
type ReplayFilter struct {
	// DestinationID names the destination (required).
	DestinationID string
	// Since and Until bound the capture time: Since <= captured_at < Until;
	// a zero time leaves that side open.
	Since, Until time.Time
	// State is the state replayed: DeliveryDeadLettered (also when ""),
	// the only replayable one.
	State string
}

// ReplayCount is what a bulk replay found and did.
type ReplayCount struct {
	// Matched counts the dead letters of the destination in the window.
	Matched int `json:"matched"`
	// Replayable counts those whose payload is retained and unexpired and
	// whose destination is bound as when they were captured.
	Replayable int `json:"replayable"`
	// Replayed counts those reopened as their next generation (0 in a dry
	// run).
	Replayed int `json:"replayed"`
	// Refused counts those that were replayable when counted and refused
	// when replayed (changed meanwhile: replayed or expired).
	Refused int `json:"refused"`
}

// ErrReplayFilter refuses a bulk replay filter.
var ErrReplayFilter = errors.New("store: replay filter")

// ReplayMatching replays every replayable dead letter f selects, oldest
// capture first, each through Replay (its own transaction, its own audit
// entry under operator, a new generation with a new key). With dryRun it
// only counts. bindings and modules are as for Replay.
func (s *Store) ReplayMatching(ctx context.Context, f ReplayFilter, bindings, modules map[string]string, operator string, dryRun bool) (_ ReplayCount, err error) {
	ctx, span := startOp(ctx, spanTx, "ReplayMatching")
	defer func() { endOp(span, err) }()
	var n ReplayCount
	if f.DestinationID == "" {
		return n, fmt.Errorf("%w: a destination is required", ErrReplayFilter)
	}
	if f.State != "" && f.State != DeliveryDeadLettered {
		return n, fmt.Errorf("%w: only %s deliveries can be replayed, not %s", ErrReplayFilter, DeliveryDeadLettered, f.State)
	}
	if !f.Since.IsZero() && !f.Until.IsZero() && !f.Since.Before(f.Until) {
		return n, fmt.Errorf("%w: the window's start must be before its end", ErrReplayFilter)
	}
	var since, until *time.Time
	if !f.Since.IsZero() {
		since = &f.Since
	}
	if !f.Until.IsZero() {
		until = &f.Until
	}
	// Identifiers and binding only: the payloads stay in the database.
	rows, err := s.pool.Query(ctx, `SELECT delivery_id::text, event_id::text, hook_id, handler_kind, destination_id, binding_digest,
    coalesce(module_digest, ''), generation, payload IS NOT NULL AND payload_expires_at > now()
    FROM registrum.event_deliveries
    WHERE state = 'dead_lettered' AND handler_kind = 'url' AND destination_id = $1
      AND ($2::timestamptz IS NULL OR captured_at >= $2) AND ($3::timestamptz IS NULL OR captured_at < $3)
    ORDER BY captured_at, delivery_id`, f.DestinationID, since, until)
	if err != nil {
		return n, fmt.Errorf("store: select dead letters: %w", err)
	}
	type candidate struct {
		d        Delivery
		retained bool
	}
	cs, err := pgx.CollectRows(rows, func(r pgx.CollectableRow) (candidate, error) {
		var c candidate
		err := r.Scan(&c.d.DeliveryID, &c.d.EventID, &c.d.HookID, &c.d.HandlerKind, &c.d.DestinationID, &c.d.BindingDigest,
			&c.d.ModuleDigest, &c.d.Generation, &c.retained)
		return c, err
	})
	if err != nil {
		return n, fmt.Errorf("store: select dead letters: %w", err)
	}
	n.Matched = len(cs)
	for _, c := range cs {
		if !c.retained || !c.d.boundIn(bindings, modules) {
			continue
		}
		n.Replayable++
		if dryRun {
			continue
		}
		_, err := s.Replay(ctx, c.d.EventID, c.d.DeliveryID, c.d.Generation, bindings, modules, operator)
		switch {
		case errors.Is(err, ErrReplayRefused):
			n.Refused++
		case err != nil:
			return n, err
		default:
			n.Replayed++
		}
	}
	return n, nil
}

// DeliveryAuditEntry is one row of the delivery audit: an operator's
// replay or refused replay, or the engine's payload expiry.
type DeliveryAuditEntry struct {
	Action     string
	Generation int
	Operator   string
	OccurredAt time.Time
}

// DeliveryAudit returns the audit of a delivery, oldest first.
func (s *Store) DeliveryAudit(ctx context.Context, deliveryID string) (_ []DeliveryAuditEntry, err error) {
	ctx, span := startOp(ctx, spanRead, "DeliveryAudit")
	defer func() { endOp(span, err) }()
	rows, err := s.pool.Query(ctx, `SELECT action, generation, operator, occurred_at FROM registrum.event_delivery_audit
    WHERE delivery_id = $1 ORDER BY id`, deliveryID)
	if err != nil {
		return nil, fmt.Errorf("store: delivery audit: %w", err)
	}
	return pgx.CollectRows(rows, func(r pgx.CollectableRow) (DeliveryAuditEntry, error) {
		var a DeliveryAuditEntry
		err := r.Scan(&a.Action, &a.Generation, &a.Operator, &a.OccurredAt)
		return a, err
	})
}

// RetryNow makes the pending deliveries of a destination due at once and
// enqueues a job for each, for an operator whose receiver is back before
// the schedule's next step (or a test that does not wait for it). The
// attempt count, generation and key stay as they are; the jobs already
// scheduled find nothing to do when they run. It returns how many it made
// due.
func (s *Store) RetryNow(ctx context.Context, destinationID string) (_ int, err error) {
	ctx, span := startOp(ctx, spanTx, "RetryNow")
	defer func() { endOp(span, err) }()
	n := 0
	err = pgx.BeginFunc(ctx, s.pool, func(tx pgx.Tx) error {
		rows, err := tx.Query(ctx, `UPDATE registrum.event_deliveries SET next_attempt_at = now(), updated_at = now()
    WHERE state = 'pending' AND handler_kind = 'url' AND destination_id = $1 RETURNING delivery_id::text`, destinationID)
		if err != nil {
			return fmt.Errorf("store: retry now: %w", err)
		}
		ids, err := pgx.CollectRows(rows, pgx.RowTo[string])
		if err != nil {
			return fmt.Errorf("store: retry now: %w", err)
		}
		n = len(ids)
		if n == 0 {
			return nil
		}
		jobs := make([]river.InsertManyParams, 0, n)
		opts := deliveryOpts(destinationID, time.Time{})
		for _, id := range ids {
			jobs = append(jobs, river.InsertManyParams{Args: DeliverEventArgs{DeliveryID: id}, InsertOpts: opts})
		}
		if _, err := s.jobs.InsertManyTx(ctx, tx, jobs); err != nil {
			return fmt.Errorf("store: retry now: %w", err)
		}
		return nil
	})
	return n, err
}
