package store

import (
	"context"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
)

// A Writer pipelines its statements. Statements whose results the caller
// does not read at once (appends of revisions and audit entries, inserts,
// state moves) are queued with send; they travel to PostgreSQL in one round
// trip together with the next statement whose row is needed (queryRow) or,
// at the latest, with the final flush before commit. The order of the
// statements on the connection is the order of the calls, so a queued
// statement's effects are visible to every later statement of the
// transaction; a queued statement that fails surfaces its error from the
// call that sends it, and the transaction rolls back as a whole.
//
// Every statement of a Writer goes through send, queryRow or db: a direct
// use of the transaction would overtake the queue.

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

// flush sends the queued statements in one round trip and reports the
// first failure.
func (w *Writer) flush(ctx context.Context) error {
	if len(w.pending) == 0 {
		return nil
	}
	br := w.sqlTx.SendBatch(ctx, w.batch())
	err := w.readPending(br)
	if cerr := br.Close(); err == nil && cerr != nil {
		err = cerr
	}
	return err
}

// batch moves the queue into a batch.
func (w *Writer) batch() *pgx.Batch {
	b := &pgx.Batch{QueuedQueries: make([]*pgx.QueuedQuery, 0, len(w.pending)+1)}
	for _, p := range w.pending {
		b.Queue(p.sql, p.args...)
	}
	return b
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
	if len(w.pending) == 0 {
		return w.sqlTx.QueryRow(ctx, sql, args...)
	}
	b := w.batch()
	b.Queue(sql, args...)
	br := w.sqlTx.SendBatch(ctx, b)
	if err := w.readPending(br); err != nil {
		br.Close()
		return failedRow{err}
	}
	return &batchRow{row: br.QueryRow(), br: br}
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
