package store

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
)

// Operator erasure of retained history (docs/decisions/history-erasure.md).
// It connects to the database directly: there is no HTTP route for it.

// ErrNothingToErase means every revision before the given commit is
// already erased, or there is none.
var ErrNothingToErase = errors.New("store: no retained revision before that commit")

// ErasedHistory reports what EraseHistory did.
type ErasedHistory struct {
	// Revisions is the number of revisions whose stored values were erased.
	Revisions int
	// Receipts is the number of ingestion chunk receipts erased with them.
	Receipts int64
	// Outcomes is the number of answers stored for idempotent replay
	// erased with them.
	Outcomes int64
	// BeforeRevision is the record's revision written by the given commit.
	BeforeRevision int64
}

// JournalEntry is one revision of a record as an operator lists it.
type JournalEntry struct {
	Revision  int64
	Lifecycle string
	CommitID  string
	CreatedAt time.Time
	Erased    bool
}

// RecordJournal lists every revision of record id of entity, oldest first,
// with its commit: what an operator names in EraseHistory.
func RecordJournal(ctx context.Context, pool *pgxpool.Pool, entity, id string) ([]JournalEntry, error) {
	rows, err := pool.Query(ctx, `SELECT revision, lifecycle, commit_id::text, created_at, erased_at IS NOT NULL
FROM registrum.revisions WHERE entity_id = $1 AND record_id = $2::uuid ORDER BY revision`, entity, id)
	if err != nil {
		return nil, fmt.Errorf("store: list revisions: %w", err)
	}
	out, err := pgx.CollectRows(rows, func(r pgx.CollectableRow) (JournalEntry, error) {
		var j JournalEntry
		err := r.Scan(&j.Revision, &j.Lifecycle, &j.CommitID, &j.CreatedAt, &j.Erased)
		j.CreatedAt = j.CreatedAt.UTC()
		return j, err
	})
	if err != nil {
		return nil, fmt.Errorf("store: list revisions: %w", err)
	}
	return out, nil
}

// EraseHistory erases the stored values and change context of every
// revision of record id of entity written before the record's revision of
// commit before (ErrNotFound when the commit wrote no revision of it). The
// revisions keep their place; revision reads no longer show them. The
// ingestion chunk receipts of the commits that wrote them are erased (410
// on read), every snapshot that sees one of those commits becomes
// unavailable, and an audit entry records the erasure under traceID and
// the record's keyed reference (as the entries of its writes name it), in
// one transaction. The current revision is never erased.
func EraseHistory(ctx context.Context, pool *pgxpool.Pool, entity, id, recordReference, before, traceID string) (*ErasedHistory, error) {
	out := &ErasedHistory{}
	err := pgx.BeginFunc(ctx, pool, func(tx pgx.Tx) error {
		err := tx.QueryRow(ctx, `SELECT revision FROM registrum.revisions WHERE entity_id = $1 AND record_id = $2::uuid AND commit_id = $3::uuid`,
			entity, id, before).Scan(&out.BeforeRevision)
		if errors.Is(err, pgx.ErrNoRows) {
			return ErrNotFound
		}
		if err != nil {
			return err
		}
		rows, err := tx.Query(ctx, `UPDATE registrum.revisions SET data = '{}'::jsonb, change_context = NULL, erased_at = now()
WHERE entity_id = $1 AND record_id = $2::uuid AND revision < $3 AND erased_at IS NULL RETURNING xid::text, commit_id::text`, entity, id, out.BeforeRevision)
		if err != nil {
			return err
		}
		var xids, commits []string
		seen := map[string]bool{}
		for rows.Next() {
			var x, c string
			if err := rows.Scan(&x, &c); err != nil {
				rows.Close()
				return err
			}
			out.Revisions++
			if !seen["x"+x] {
				seen["x"+x] = true
				xids = append(xids, x)
			}
			if !seen["c"+c] {
				seen["c"+c] = true
				commits = append(commits, c)
			}
		}
		rows.Close()
		if err := rows.Err(); err != nil {
			return err
		}
		if out.Revisions == 0 {
			return ErrNothingToErase
		}
		if _, err := tx.Exec(ctx, `INSERT INTO registrum.history_erasures (entity_id, record_id, before_commit, revisions, xids, commit_ids, trace_id)
VALUES ($1, $2::uuid, $3::uuid, $4, $5::text[]::xid8[], $6::uuid[], $7)`, entity, id, before, out.Revisions, xids, commits, traceID); err != nil {
			return err
		}
		tag, err := tx.Exec(ctx, `UPDATE registrum.ingestion_run_chunks SET receipt = NULL, receipt_token = NULL, erased_at = now() WHERE commit_id = ANY($1::uuid[]) AND erased_at IS NULL`, commits)
		if err != nil {
			return err
		}
		out.Receipts = tag.RowsAffected()
		// The answers stored for idempotent replay of those commits hold
		// the erased values too.
		tag, err = tx.Exec(ctx, `UPDATE registrum.idempotency SET outcome = NULL, outcome_erased_at = now() WHERE commit_id = ANY($1::uuid[]) AND outcome_erased_at IS NULL`, commits)
		if err != nil {
			return err
		}
		out.Outcomes = tag.RowsAffected()
		if _, err := tx.Exec(ctx, `INSERT INTO registrum.audit (operation, outcome, entity_id, record_reference, revision, trace_id) VALUES ('history.erase', 'succeeded', $1, $2, $3, $4)`,
			entity, recordReference, out.BeforeRevision, traceID); err != nil {
			return err
		}
		return nil
	})
	if errors.Is(err, ErrNotFound) || errors.Is(err, ErrNothingToErase) {
		return nil, err
	}
	if err != nil {
		return nil, fmt.Errorf("store: erase history: %w", err)
	}
	return out, nil
}
