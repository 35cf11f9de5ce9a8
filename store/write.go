package store

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"go.opentelemetry.io/otel/attribute"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/riverqueue/river"

	"github.com/registrum/registrum/model"
	"github.com/registrum/registrum/store/layout"
)

// ErrIdempotencyConflict means the idempotency key was used before with a
// different request.
var ErrIdempotencyConflict = errors.New("store: idempotency key used with a different request")

// ErrOutcomeErased means the outcome stored under an idempotency key was
// erased with the retained history it held: the write happened, its answer
// is no longer available.
var ErrOutcomeErased = errors.New("store: the stored outcome of the idempotency key was erased")

// ErrStale means the record's current revision is not the one expected, or
// the record is no longer live.
var ErrStale = errors.New("store: the record changed since the expected revision")

// Idempotency binds a write to an idempotency key.
type Idempotency struct {
	// KeyReference is a keyed digest of the caller and the key, so that keys
	// are scoped to the caller and never stored in the clear.
	KeyReference string
	// RequestDigest identifies the request; the same key with another
	// request is a conflict.
	RequestDigest string
}

// Outcome is what a successful write answered, kept for idempotent replay.
type Outcome struct {
	Status   int    `json:"status"`
	ETag     string `json:"etag,omitempty"`
	Location string `json:"location,omitempty"`
	// Body is the exact response body.
	Body []byte `json:"body"`
}

// Writer performs the writes of one transaction. All revisions it appends
// share one commit id.
type Writer struct {
	s *Store
	// conn is used through send, queryRow, db and direct only (pipeline.go):
	// a statement sent on it directly would overtake the queued ones.
	conn *pgx.Conn
	// tx is the transaction once its BEGIN was sent (begun).
	tx       pgx.Tx
	begun    bool
	commitID string
	now      time.Time
	// replayed is set when the idempotency key turned out taken.
	replayed bool
	// deliveryJobs are the jobs of the event deliveries captured so far.
	deliveryJobs []river.InsertManyParams
	pending      []pendingStatement
	// snapshot is the state just after the commit, once taken (Snapshot);
	// no revision may be appended after it.
	snapshot *Snapshot
	// keyed is set when the write stores its outcome under an idempotency
	// key: the statement that stores it reads the write's snapshot.
	keyed bool
	// storesAnswer is set when the transaction stores the answer it
	// returns without a key (StoresAnswer).
	storesAnswer bool
	// atCommit, once TokenAtCommit was called, is the snapshot read in the
	// round trip that carries COMMIT and what waits for its token.
	atCommit *commitSnapshot
}

// CommitID returns the commit id shared by the transaction's revisions.
func (w *Writer) CommitID() string { return w.commitID }

// Write runs fn in one transaction. With an idempotency binding, a key seen
// before with the same request returns the stored outcome and replayed=true;
// with another request it returns ErrIdempotencyConflict; concurrent first
// uses of one key resolve to a single write. The key is taken by the first
// statement of the transaction, which travels with fn's first round trip:
// when the key was taken, that round trip fails before any statement of fn
// runs, fn sees the failure, and nothing it queued is written. A constraint
// violated at commit is returned as a *ConstraintError.
func (s *Store) Write(ctx context.Context, idem *Idempotency, fn func(w *Writer) (*Outcome, error)) (out *Outcome, replayed bool, err error) {
	// One span per write transaction: the jobs it enqueues (their
	// traceparent is taken inside it) are its children.
	ctx, span := startSpan(ctx, spanWrite)
	defer func() {
		span.SetAttributes(attribute.Bool("registrum.replayed", replayed))
		endSpan(span, err)
	}()
	out, replayed, err = s.write(ctx, idem, fn)
	if replayed {
		// The connection is back in the pool: the replay reads on another.
		out, err = s.replay(ctx, idem)
		if err != nil {
			return nil, false, err
		}
		return out, true, nil
	}
	if err != nil {
		return nil, false, s.writeError(nil, err)
	}
	return out, false, nil
}

// write runs fn in one transaction on a connection of its own, and reports
// whether the idempotency key turned out taken.
func (s *Store) write(ctx context.Context, idem *Idempotency, fn func(w *Writer) (*Outcome, error)) (*Outcome, bool, error) {
	conn, err := s.pool.Acquire(ctx)
	if err != nil {
		return nil, false, err
	}
	w := &Writer{s: s, conn: conn.Conn(), commitID: uuid.NewString(), now: time.Now().UTC().Truncate(time.Microsecond)}
	defer func() {
		w.end(ctx)
		conn.Release()
	}()
	if idem != nil {
		w.keyed = true
		// The commit id rides with the key, so that storing the outcome
		// changes no indexed column: PostgreSQL then updates the row in
		// place (a heap-only tuple) without touching either index.
		w.send(nil, w.keyTaken, SQLTakeKey, idem.KeyReference, idem.RequestDigest, w.commitID)
	}
	o, err := fn(w)
	if err == nil {
		err = w.insertDeliveryJobs(ctx)
	}
	if err == nil && idem != nil {
		if w.atCommit != nil {
			err = w.atCommit.queueOutcome(w, idem, o)
		} else {
			var b []byte
			if b, err = json.Marshal(o); err == nil {
				w.send(nil, nil, SQLStoreOutcome, idem.KeyReference, b)
			}
		}
	}
	if err == nil {
		err = w.commit(ctx)
	}
	if err == nil && w.atCommit != nil {
		// Committed: what is left cannot fail on the database's account
		// (the statement that read the snapshot refused anything the
		// caller could not name).
		err = w.atCommit.deliver(w, o)
	}
	if err != nil && idem != nil && !w.begun && !w.replayed {
		// fn refused before anything reached the database: a key taken
		// before answers its stored outcome, whatever fn said now.
		w.pending = w.pending[:1]
		if ferr := w.flush(ctx); !w.replayed && ferr != nil {
			err = errors.Join(err, ferr)
		}
	}
	if w.replayed {
		return nil, true, nil
	}
	return o, false, err
}

// replay reads the outcome stored under a key that a write found taken.
func (s *Store) replay(ctx context.Context, idem *Idempotency) (*Outcome, error) {
	out, err := storedOutcome(s.pool.QueryRow(ctx, `SELECT request_digest, outcome, outcome_erased_at IS NOT NULL FROM registrum.idempotency WHERE key_reference = $1`, idem.KeyReference), idem)
	if err == nil && out == nil {
		return nil, fmt.Errorf("store: the idempotency key's outcome is missing")
	}
	return out, err
}

// Create inserts a new record at revision 1.
func (w *Writer) Create(ctx context.Context, e *model.Entity, id string, values map[string]any, j Journal) (*Record, error) {
	args := []any{id, w.now, w.s.pkg.Revision}
	set := make([]*model.Field, 0, len(e.Fields))
	for _, f := range e.Fields {
		v, ok := values[f.ID]
		if !ok || v == nil {
			continue
		}
		set = append(set, f)
		args = append(args, storageArg(v))
	}
	w.send(nil, func(err error) error { return w.s.writeError(e, err) }, SQLCreateRecord(e, set), args...)
	rec := &Record{Entity: e, ID: id, Revision: 1, Lifecycle: layout.LifecycleActive, CreatedAt: w.now, UpdatedAt: w.now, Values: values}
	if err := w.journal(ctx, "create", rec, j); err != nil {
		return nil, err
	}
	if err := w.Capture(ctx, Change{Entity: e, Trigger: model.TriggerCreated, After: rec}); err != nil {
		return nil, err
	}
	return rec, nil
}

// Lock reads a record's current state and locks it until the transaction ends.
func (w *Writer) Lock(ctx context.Context, e *model.Entity, id string) (*Record, error) {
	return w.s.get(ctx, w.db(), e, id, true)
}

// Update writes the full new state of a live record as its next revision.
// expected is the revision the caller read; anything else is ErrStale.
func (w *Writer) Update(ctx context.Context, e *model.Entity, id string, expected int64, values map[string]any, j Journal) (*Record, error) {
	var before *Record
	if w.capturing(e, model.TriggerPatched) {
		// Events compare before and after values: read the row (locked, as
		// the update would lock it).
		cur, err := w.Lock(ctx, e, id)
		if errors.Is(err, ErrNotFound) {
			return nil, ErrStale
		}
		if err != nil {
			return nil, err
		}
		before = cur
	}
	sets := []string{layout.ColRevision + " = " + layout.ColRevision + " + 1", layout.ColUpdatedAt + " = $3", layout.ColPackageRevision + " = $4"}
	args := []any{id, expected, w.now, w.s.pkg.Revision}
	for _, f := range e.Fields {
		args = append(args, storageArg(values[f.ID]))
		sets = append(sets, layout.Column(f)+" = $"+strconv.Itoa(len(args)))
	}
	q := "UPDATE " + layout.Table(e) + " SET " + strings.Join(sets, ", ") +
		" WHERE " + layout.ColRecordID + " = $1 AND " + layout.ColRevision + " = $2 AND " + layout.ColLifecycle + " = '" + layout.LifecycleActive + "'" +
		" RETURNING " + layout.ColRevision + ", " + layout.ColCreatedAt
	rec := &Record{Entity: e, ID: id, Lifecycle: layout.LifecycleActive, UpdatedAt: w.now, Values: values}
	if err := w.queryRow(ctx, q, args...).Scan(&rec.Revision, &rec.CreatedAt); err != nil {
		if errors.Is(err, pgx.ErrNoRows) {
			return nil, ErrStale
		}
		return nil, w.s.writeError(e, err)
	}
	rec.CreatedAt = rec.CreatedAt.UTC()
	if err := w.journal(ctx, "patch", rec, j); err != nil {
		return nil, err
	}
	if before != nil {
		if err := w.Capture(ctx, Change{Entity: e, Trigger: model.TriggerPatched, Before: before, After: rec}); err != nil {
			return nil, err
		}
	}
	return rec, nil
}

// Tombstone marks a live record tombstoned as its next revision; its values
// are kept.
func (w *Writer) Tombstone(ctx context.Context, e *model.Entity, id string, expected int64, j Journal) (*Record, error) {
	current, err := w.Lock(ctx, e, id)
	if err != nil {
		return nil, err
	}
	if current.Revision != expected || current.Lifecycle != layout.LifecycleActive {
		return nil, ErrStale
	}
	before := *current
	q := "UPDATE " + layout.Table(e) + " SET " + layout.ColRevision + " = " + layout.ColRevision + " + 1, " +
		layout.ColLifecycle + " = '" + layout.LifecycleTombstoned + "', " + layout.ColUpdatedAt + " = $2, " + layout.ColPackageRevision + " = $3" +
		" WHERE " + layout.ColRecordID + " = $1"
	w.send(nil, func(err error) error { return w.s.writeError(e, err) }, q, id, w.now, w.s.pkg.Revision)
	current.Revision++
	current.Lifecycle = layout.LifecycleTombstoned
	current.UpdatedAt = w.now
	if err := w.journal(ctx, "tombstone", current, j); err != nil {
		return nil, err
	}
	if err := w.Capture(ctx, Change{Entity: e, Trigger: model.TriggerTombstoned, Before: &before, After: current}); err != nil {
		return nil, err
	}
	return current, nil
}

// journal appends the revision and the audit entry of a write.
func (w *Writer) journal(ctx context.Context, operation string, rec *Record, j Journal) error {
	if w.snapshot != nil || w.atCommit != nil {
		return errors.New("store: a revision appended after the write's snapshot was taken")
	}
	w.send(nil, func(err error) error { return fmt.Errorf("store: append revision: %w", err) }, SQLAppendRevision,
		rec.Entity.ID, rec.ID, rec.Revision, rec.Lifecycle, string(j.Data), w.s.pkg.Revision, j.OperationID, w.commitID, w.now, nullableJSON(j.ChangeContext))
	w.send(nil, func(err error) error { return fmt.Errorf("store: append audit entry: %w", err) }, SQLAppendAudit,
		operation, rec.Entity.ID, j.RecordReference, rec.Revision, j.PrincipalReference, j.TraceID)
	return nil
}

// writeError turns a PostgreSQL constraint violation into a ConstraintError.
func (s *Store) writeError(e *model.Entity, err error) error {
	var ce *ConstraintError
	if errors.As(err, &ce) || errors.Is(err, ErrStale) || errors.Is(err, ErrNotFound) || errors.Is(err, ErrIdempotencyConflict) {
		return err
	}
	var pgErr *pgconn.PgError
	if errors.As(err, &pgErr) && strings.HasPrefix(pgErr.Code, "23") {
		owner, ok := s.owners[pgErr.ConstraintName]
		if !ok {
			owner = layout.Owner{Kind: "integrity"}
			if e != nil {
				owner.EntityID = e.ID
			}
		}
		return &ConstraintError{Owner: owner, SQLState: pgErr.Code}
	}
	return fmt.Errorf("store: write: %w", err)
}

func nullableJSON(b []byte) any {
	if len(b) == 0 {
		return nil
	}
	return string(b)
}

// ConstraintsImmediately makes the transaction check its deferred
// constraints at the end of each statement from now on, so that a
// violation is reported by the write that causes it (with Flush).
func (w *Writer) ConstraintsImmediately() {
	w.send(nil, func(err error) error { return fmt.Errorf("store: constraints immediately: %w", err) }, "SET CONSTRAINTS ALL IMMEDIATE")
}

// Flush sends the statements queued so far and reports the first failure,
// as a ConstraintError when one violates a constraint.
func (w *Writer) Flush(ctx context.Context) error {
	return w.flush(ctx)
}

// NewRecord is one record CreateMany inserts.
type NewRecord struct {
	ID      string
	Values  map[string]any
	Journal Journal
}

// maxInsertParams keeps a multi-row insert under PostgreSQL's 65535
// parameters of a statement.
const maxInsertParams = 60000

// CreateMany inserts records at revision 1, each with its revision and
// audit entry, as Create does one by one, in three multi-row statements
// (more only past maxInsertParams): what a batch of creates costs the
// database is then its rows, not a statement per row. The values every
// row shares (revision, lifecycle, times, package revision, entity, commit)
// are one parameter each, which each row names, so that a chunk of 100
// creates sends about 1,400 parameters instead of 2,900. A violated
// constraint is reported for the statement, not the record.
func (w *Writer) CreateMany(ctx context.Context, e *model.Entity, recs []NewRecord) ([]*Record, error) {
	n := len(recs)
	out := make([]*Record, n)
	if n == 0 {
		return out, nil
	}
	records := make([]Record, n)
	perRecord := 1 + len(e.Fields)
	recordArgs := make([]any, 0, n*perRecord)
	revisionArgs := make([]any, 0, n*4)
	auditArgs := make([]any, 0, n*3)
	for i, r := range recs {
		recordArgs = append(recordArgs, r.ID)
		for _, f := range e.Fields {
			v, ok := r.Values[f.ID]
			if !ok || v == nil {
				recordArgs = append(recordArgs, nil)
				continue
			}
			recordArgs = append(recordArgs, storageArg(v))
		}
		j := r.Journal
		revisionArgs = append(revisionArgs, r.ID, string(j.Data), j.OperationID, nullableJSON(j.ChangeContext))
		var principal any
		if j.PrincipalReference != "" {
			principal = j.PrincipalReference
		}
		auditArgs = append(auditArgs, j.RecordReference, principal, j.TraceID)
		records[i] = Record{Entity: e, ID: r.ID, Revision: 1, Lifecycle: layout.LifecycleActive, CreatedAt: w.now, UpdatedAt: w.now, Values: r.Values}
		out[i] = &records[i]
	}
	w.sendRows(recordInsert(e), []any{int64(1), layout.LifecycleActive, w.now, w.s.pkg.Revision}, recordArgs,
		func(err error) error { return w.s.writeError(e, err) })
	w.sendRows(revisionsInsert, []any{e.ID, int64(1), layout.LifecycleActive, w.s.pkg.Revision, w.commitID, w.now}, revisionArgs,
		func(err error) error { return fmt.Errorf("store: append revisions: %w", err) })
	w.sendRows(auditInsert, []any{"create", "succeeded", e.ID, int64(1)}, auditArgs,
		func(err error) error { return fmt.Errorf("store: append audit entries: %w", err) })
	for _, rec := range out {
		if err := w.Capture(ctx, Change{Entity: e, Trigger: model.TriggerCreated, After: rec}); err != nil {
			return nil, err
		}
	}
	return out, nil
}

// multiInsert is the text of a multi-row insert but for its rows: its
// columns, and for each the shared parameter it takes (its index in the
// shared arguments) or -1 for a value of the row's own.
type multiInsert struct {
	prefix string
	shape  []int
	// own is the number of values of a row's own.
	own int
	// last is the statement text built last, kept for the next statement
	// of as many rows: a run's chunks are all of one size but the last.
	last atomic.Pointer[insertText]
}

// insertText is the statement text of a multi-row insert of rows rows.
type insertText struct {
	rows int
	text string
}

// newMultiInsert is the multi-row insert into table of columns cols, shape
// as multiInsert says.
func newMultiInsert(table string, cols []string, shape []int) *multiInsert {
	m := &multiInsert{prefix: "INSERT INTO " + table + " (" + strings.Join(cols, ", ") + ") VALUES ", shape: shape}
	for _, k := range shape {
		if k < 0 {
			m.own++
		}
	}
	return m
}

// The revisions and audit entries of CreateMany: the shared arguments are
// entity, revision, lifecycle, package revision, commit id and time, and
// operation, outcome, entity and revision.
var (
	revisionsInsert = newMultiInsert("registrum.revisions",
		[]string{"entity_id", "record_id", "revision", "lifecycle", "data", "package_revision", "operation_id", "commit_id", "created_at", "change_context"},
		[]int{0, -1, 1, 2, -1, 3, -1, 4, 5, -1})
	auditInsert = newMultiInsert("registrum.audit",
		[]string{"operation", "outcome", "entity_id", "record_reference", "revision", "principal_reference", "trace_id"},
		[]int{0, 1, 2, -1, 3, -1, -1})
	// recordInserts holds each entity's recordInsert, by entity.
	recordInserts sync.Map
)

// recordInsert is the multi-row insert of e's new records: the record id
// and the field values are the row's own; revision, lifecycle, creation
// and update time and package revision are shared.
func recordInsert(e *model.Entity) *multiInsert {
	if m, ok := recordInserts.Load(e); ok {
		return m.(*multiInsert)
	}
	cols := []string{layout.ColRecordID, layout.ColRevision, layout.ColLifecycle, layout.ColCreatedAt, layout.ColUpdatedAt, layout.ColPackageRevision}
	shape := []int{-1, 0, 1, 2, 2, 3}
	for _, f := range e.Fields {
		cols = append(cols, layout.Column(f))
		shape = append(shape, -1)
	}
	m, _ := recordInserts.LoadOrStore(e, newMultiInsert(layout.Table(e), cols, shape))
	return m.(*multiInsert)
}

// text is m's statement for rows rows: the shared parameters first ($1…),
// then each row's own, row after row.
func (m *multiInsert) text(shared, rows int) string {
	if t := m.last.Load(); t != nil && t.rows == rows {
		return t.text
	}
	var sql strings.Builder
	sql.WriteString(m.prefix)
	next := shared
	for r := range rows {
		if r > 0 {
			sql.WriteByte(',')
		}
		sql.WriteByte('(')
		for k, at := range m.shape {
			if k > 0 {
				sql.WriteByte(',')
			}
			sql.WriteByte('$')
			if at < 0 {
				next++
				sql.WriteString(strconv.Itoa(next))
			} else {
				sql.WriteString(strconv.Itoa(at + 1))
			}
		}
		sql.WriteByte(')')
	}
	t := &insertText{rows: rows, text: sql.String()}
	m.last.Store(t)
	return t.text
}

// sendRows queues m's rows: own holds m.own values per row, row after
// row, and shared the values every row shares; as few statements as the
// parameter bound allows.
func (w *Writer) sendRows(m *multiInsert, shared, own []any, wrap func(error) error) {
	rows := len(own) / m.own
	per := max(1, (maxInsertParams-len(shared))/m.own)
	for start := 0; start < rows; start += per {
		n := min(per, rows-start)
		args := make([]any, 0, len(shared)+n*m.own)
		args = append(args, shared...)
		args = append(args, own[start*m.own:(start+n)*m.own]...)
		w.send(nil, wrap, m.text(len(shared), n), args...)
	}
}
