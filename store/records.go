package store

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/registrum/registrum/model"
	"github.com/registrum/registrum/store/layout"
)

// ErrNotFound means no record has the given id.
var ErrNotFound = errors.New("store: record not found")

// Record is the current state of one record.
type Record struct {
	Entity    *model.Entity
	ID        string
	Revision  int64
	Lifecycle string
	CreatedAt time.Time
	UpdatedAt time.Time
	// Values holds the stored field values by authored field id, in storage
	// form: string (string, text, code, decimal, date, uuid, reference),
	// int64, bool, time.Time (timestamp), json.RawMessage (crs84-point,
	// structured). A missing or nil value is SQL NULL. Nil on the records
	// of a page (Store.Page), which hold their values in Row.
	Values map[string]any
	// Row holds the stored values of the records of a page (Store.Page) by
	// position in Entity.Fields, in the storage forms of Values; nil on
	// every other read. A page builds no map per record. Value reads a
	// field's value from either.
	Row []any
}

// Value returns the stored value of field f of the record's entity (nil
// for NULL, and for a field the entity does not have), from Row on a
// record of a page and from Values otherwise.
func (r *Record) Value(f *model.Field) any {
	if r.Row == nil {
		return r.Values[f.ID]
	}
	// By identity, or by id for a field of another compilation of the
	// same entity (ids are unique within an entity).
	for i, g := range r.Entity.Fields {
		if g == f || g.ID == f.ID {
			return r.Row[i]
		}
	}
	return nil
}

// ValueMap returns the record's stored values by authored field id: Values,
// or a new map of Row's values on a record of a page.
func (r *Record) ValueMap() map[string]any {
	if r.Row == nil {
		return r.Values
	}
	m := make(map[string]any, len(r.Row))
	for i, f := range r.Entity.Fields {
		m[f.ID] = r.Row[i]
	}
	return m
}

// Journal describes the write for the revision journal and the audit trail.
// Every member is value-free: keyed references and identifiers only.
type Journal struct {
	OperationID        string // UUID of the operation
	CommitID           string // UUID shared by every revision one transaction writes
	TraceID            string // 32 lowercase hex
	PrincipalReference string // keyed reference of the caller, or ""
	RecordReference    string // keyed reference of the record
	// Data is the canonical JSON of the record's stored values in their
	// wire encoding, keyed by authored field id, kept in the revision journal.
	Data []byte
	// ChangeContext is the canonical JSON of a batch's change context, or nil.
	ChangeContext []byte
}

// ConstraintError is a write refused by a constraint PostgreSQL enforces.
type ConstraintError struct {
	Owner layout.Owner
	// SQLState is the PostgreSQL error code.
	SQLState string
}

func (e *ConstraintError) Error() string {
	what := e.Owner.Kind
	if e.Owner.ConstraintID != "" {
		what += " constraint " + e.Owner.ConstraintID
	}
	if e.Owner.FieldID != "" {
		what += " on field " + e.Owner.FieldID
	}
	return fmt.Sprintf("store: %s of entity %s violated", what, e.Owner.EntityID)
}

// Create inserts a new record at revision 1 in a transaction of its own.
func (s *Store) Create(ctx context.Context, e *model.Entity, id string, values map[string]any, j Journal) (*Record, error) {
	var rec *Record
	_, _, err := s.Write(ctx, nil, func(w *Writer) (*Outcome, error) {
		var err error
		rec, err = w.Create(ctx, e, id, values, j)
		return &Outcome{}, err
	})
	if err != nil {
		return nil, err
	}
	return rec, nil
}

// Get returns the current state of a record, tombstoned or not.
func (s *Store) Get(ctx context.Context, e *model.Entity, id string) (_ *Record, err error) {
	ctx, span := startOp(ctx, spanRead, "Get")
	defer func() { endOp(span, err) }()
	return s.get(ctx, s.pool, e, id, false)
}

type querier interface {
	QueryRow(ctx context.Context, sql string, args ...any) pgx.Row
}

func (s *Store) get(ctx context.Context, db querier, e *model.Entity, id string, forUpdate bool) (*Record, error) {
	return s.scanRecord(db.QueryRow(ctx, s.readSQL(e, forUpdate), id), e, id)
}

// scanRecord reads a row of readSQL.
func (s *Store) scanRecord(row pgx.Row, e *model.Entity, id string) (*Record, error) {
	var rs recordScan
	rs.init(e, id)
	if err := row.Scan(rs.dest...); err != nil {
		if errors.Is(err, pgx.ErrNoRows) {
			return nil, ErrNotFound
		}
		return nil, fmt.Errorf("store: read %s record: %w", e.ID, err)
	}
	return rs.record(), nil
}

// recordScan is the scan of a record's columns (recordColumns) in a row.
type recordScan struct {
	rec  *Record
	raw  []any
	dest []any
}

// init readies rs for the scan of record id of e.
func (rs *recordScan) init(e *model.Entity, id string) {
	rs.rec = &Record{Entity: e, ID: id, Values: make(map[string]any, len(e.Fields))}
	rs.raw = make([]any, len(e.Fields))
	rs.dest = append(make([]any, 0, 4+len(e.Fields)), &rs.rec.Revision, &rs.rec.Lifecycle, &rs.rec.CreatedAt, &rs.rec.UpdatedAt)
	for i := range rs.raw {
		rs.dest = append(rs.dest, &rs.raw[i])
	}
}

// record returns the record the row held.
func (rs *recordScan) record() *Record {
	rec := rs.rec
	for i, f := range rec.Entity.Fields {
		rec.Values[f.ID] = fromStorage(f, rs.raw[i])
	}
	rec.CreatedAt, rec.UpdatedAt = rec.CreatedAt.UTC(), rec.UpdatedAt.UTC()
	return rec
}

// recordColumns returns the select list of one record of e (without its
// id), each column qualified by table (an alias, or "").
func recordColumns(e *model.Entity, table string) string {
	q := ""
	if table != "" {
		q = table + "."
	}
	sel := []string{q + layout.ColRevision, q + layout.ColLifecycle, q + layout.ColCreatedAt, q + layout.ColUpdatedAt}
	for _, f := range e.Fields {
		sel = append(sel, q+selectExpr(f))
	}
	return strings.Join(sel, ", ")
}

// readSQL returns the statement reading one record of e by id, built once
// per entity.
func (s *Store) readSQL(e *model.Entity, forUpdate bool) string {
	qs, ok := s.reads.Load(e)
	if !ok {
		q := "SELECT " + recordColumns(e, "") + " FROM " + layout.Table(e) + " WHERE " + layout.ColRecordID + " = $1"
		qs, _ = s.reads.LoadOrStore(e, [2]string{q, q + " FOR UPDATE"})
	}
	if forUpdate {
		return qs.([2]string)[1]
	}
	return qs.([2]string)[0]
}

// selectExpr reads a field column so that it scans into a storage-form value.
func selectExpr(f *model.Field) string {
	col := layout.Column(f)
	switch f.Type {
	case model.TypeDecimal, model.TypeDate, model.TypeUUID, model.TypeReference, model.TypeCRS84Point, model.TypeStructured:
		return col + "::text"
	}
	return col
}

func fromStorage(f *model.Field, v any) any {
	if v == nil {
		return nil
	}
	switch f.Type {
	case model.TypeCRS84Point, model.TypeStructured:
		if s, ok := v.(string); ok {
			return json.RawMessage(s)
		}
	case model.TypeTimestamp:
		if t, ok := v.(time.Time); ok {
			return t.UTC()
		}
	}
	return v
}

// storageArg turns a storage-form value into a query argument.
func storageArg(v any) any {
	if raw, ok := v.(json.RawMessage); ok {
		return string(raw)
	}
	return v
}
