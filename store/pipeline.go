package store

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
)

// A Writer pipelines its statements, its transaction's BEGIN and COMMIT
// included. Statements whose results the caller does not read at once
// (appends of revisions and audit entries, inserts, state moves) are queued
// with send; they travel to PostgreSQL in one round trip together with the
// next statement whose row is needed (queryRow) or, at the latest, with the
// final COMMIT. The transaction's BEGIN travels with the first round trip,
// and the idempotency key's insert is the first statement after it. The
// order of the statements on the connection is the order of the calls, so a
// queued statement's effects are visible to every later statement of the
// transaction; a queued statement that fails surfaces its error from the
// call that sends it, PostgreSQL skips every statement after it in that
// round trip (COMMIT included), and the transaction rolls back as a whole.
//
// Every statement of a Writer goes through send, queryRow, db or direct: a
// use of the connection that skipped the queue would overtake it.

// pendingStatement is one queued statement.
type pendingStatement struct {
	sql  string
	args []any
	// check inspects the command tag; an error from it fails the write.
	check func(pgconn.CommandTag) error
	// wrap gives a failed statement's error its context.
	wrap func(error) error
	// row, when set, reads the statement's row instead of its tag.
	row func(pgx.Row) error
}

// send queues a statement whose result the caller does not read now.
func (w *Writer) send(check func(pgconn.CommandTag) error, wrap func(error) error, sql string, args ...any) {
	w.pending = append(w.pending, pendingStatement{sql: sql, args: args, check: check, wrap: wrap})
}

// sendRow queues a statement whose row read reads when the statement's
// round trip is made: its results are ready after the next queryRow or
// flush.
func (w *Writer) sendRow(read func(pgx.Row) error, sql string, args ...any) {
	w.pending = append(w.pending, pendingStatement{sql: sql, args: args, row: read})
}

// sendBatch sends the queued statements and extra (if any) in one round
// trip, beginning the transaction first if this is its first round trip.
// The results of the queued statements are read (and the queue emptied) by
// readPending.
func (w *Writer) sendBatch(ctx context.Context, extra string, args ...any) (pgx.BatchResults, error) {
	b := &pgx.Batch{QueuedQueries: make([]*pgx.QueuedQuery, 0, len(w.pending)+2)}
	begin := !w.begun
	if begin {
		b.BeginTx(pgx.TxOptions{})
	}
	for _, p := range w.pending {
		b.Queue(p.sql, p.args...)
	}
	if extra != "" {
		b.Queue(extra, args...)
	}
	br := w.conn.SendBatch(ctx, b)
	if begin {
		w.begun, w.tx = true, br.Tx()
		if _, err := br.Exec(); err != nil {
			w.pending = w.pending[:0]
			br.Close()
			return nil, fmt.Errorf("store: begin: %w", err)
		}
	}
	return br, nil
}

// flush sends the queued statements in one round trip (the transaction's
// BEGIN with them, the first time) and reports the first failure.
func (w *Writer) flush(ctx context.Context) error {
	if len(w.pending) == 0 && w.begun {
		return nil
	}
	br, err := w.sendBatch(ctx, "")
	if err != nil {
		return err
	}
	err = w.readPending(br)
	if cerr := br.Close(); err == nil && cerr != nil {
		err = cerr
	}
	return err
}

// commit sends the queued statements and COMMIT in one round trip. A
// statement that fails keeps COMMIT from running; a constraint checked at
// commit fails COMMIT itself.
func (w *Writer) commit(ctx context.Context) error {
	if len(w.pending) == 0 && !w.begun {
		return nil // nothing was written
	}
	switch {
	case w.atCommit == nil:
	case w.atCommit.marker == "":
		// The last statement before COMMIT (a stored answer reads it in the
		// statement that stores it): every write of the transaction, event
		// deliveries' jobs included, was queued or sent before it.
		w.sendRow(w.atCommit.read, sqlWriteSnapshot, w.s.fp, w.s.maxInProgress)
	case !w.atCommit.stored:
		return errors.New("store: a write rendered its answer for storing but did not store it")
	}
	br, err := w.sendBatch(ctx, "COMMIT")
	if err != nil {
		return err
	}
	err = w.readPending(br)
	if err == nil {
		var tag pgconn.CommandTag
		if tag, err = br.Exec(); err == nil && tag.String() == "ROLLBACK" {
			err = pgx.ErrTxCommitRollback
		}
	}
	if cerr := br.Close(); err == nil && cerr != nil {
		err = cerr
	}
	return err
}

// end rolls back a transaction that did not commit, so that the connection
// goes back to the pool outside any transaction. A connection it cannot
// bring back is closed (and the pool discards it).
func (w *Writer) end(ctx context.Context) {
	if !w.begun || w.conn.IsClosed() || w.conn.PgConn().TxStatus() == 'I' {
		return
	}
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 5*time.Second)
	defer cancel()
	if _, err := w.conn.Exec(ctx, "ROLLBACK"); err != nil {
		w.conn.Close(ctx)
	}
}

// readPending reads the results of the queued statements in order and
// empties the queue.
func (w *Writer) readPending(br pgx.BatchResults) error {
	pending := w.pending
	w.pending = w.pending[:0]
	for _, p := range pending {
		if p.row != nil {
			if err := p.row(br.QueryRow()); err != nil {
				return err
			}
			continue
		}
		tag, err := br.Exec()
		if err != nil {
			if p.wrap != nil {
				return p.wrap(err)
			}
			return err
		}
		if p.check != nil {
			if err := p.check(tag); err != nil {
				return err
			}
		}
	}
	return nil
}

// queryRow sends the queued statements and q in one round trip and returns
// q's row.
func (w *Writer) queryRow(ctx context.Context, sql string, args ...any) pgx.Row {
	br, err := w.sendBatch(ctx, sql, args...)
	if err != nil {
		return failedRow{err}
	}
	if err := w.readPending(br); err != nil {
		br.Close()
		return failedRow{err}
	}
	return &batchRow{row: br.QueryRow(), br: br}
}

// direct sends the queued statements and returns the transaction for a
// statement that cannot be queued (one whose rows are many, or one sent by
// another library such as River's inserts).
func (w *Writer) direct(ctx context.Context) (pgx.Tx, error) {
	if err := w.flush(ctx); err != nil {
		return nil, err
	}
	return w.tx, nil
}

// errReplayed unwinds a transaction whose idempotency key was taken.
var errReplayed = errors.New("store: the idempotency key was taken by a committed write")

// keyTaken turns the idempotency key's insert failing on its primary key
// into errReplayed. The insert waited for the write that held the key to
// end, so that write's outcome is committed.
func (w *Writer) keyTaken(err error) error {
	var pgErr *pgconn.PgError
	if errors.As(err, &pgErr) && pgErr.Code == "23505" && pgErr.ConstraintName == "idempotency_pkey" {
		w.replayed = true
		return errReplayed
	}
	return fmt.Errorf("store: take idempotency key: %w", err)
}

// db returns the querier that reads through the Writer's pipeline.
func (w *Writer) db() querier { return writerQuerier{w} }

type writerQuerier struct{ w *Writer }

func (q writerQuerier) QueryRow(ctx context.Context, sql string, args ...any) pgx.Row {
	return q.w.queryRow(ctx, sql, args...)
}

// batchRow is the row of the last statement of a batch; scanning it closes
// the batch.
type batchRow struct {
	row pgx.Row
	br  pgx.BatchResults
}

func (r *batchRow) Scan(dest ...any) error {
	err := r.row.Scan(dest...)
	cerr := r.br.Close()
	if err == nil && cerr != nil {
		err = cerr
	}
	return err
}

// failedRow is a row whose statement could not run.
type failedRow struct{ err error }

func (r failedRow) Scan(...any) error { return r.err }
