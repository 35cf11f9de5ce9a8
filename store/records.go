package store

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"

	"github.com/registrum/registrum/host/model"
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
	// structured). A missing or nil value is SQL NULL.
	Values map[string]any
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

// Create inserts a new record at revision 1 with the given values, appends
// its first revision and an audit entry, all in one transaction.
func (s *Store) Create(ctx context.Context, e *model.Entity, id string, values map[string]any, j Journal) (*Record, error) {
	cols := []string{layout.ColRecordID, layout.ColRevision, layout.ColLifecycle, layout.ColCreatedAt, layout.ColUpdatedAt, layout.ColPackageRevision}
	ph := []string{"$1", "1", "'" + layout.LifecycleActive + "'", "$2", "$2", "$3"}
	now := time.Now().UTC().Truncate(time.Microsecond)
	args := []any{id, now, s.pkg.Revision}
	for _, f := range e.Fields {
		v, ok := values[f.ID]
		if !ok || v == nil {
			continue
		}
		cols = append(cols, layout.Column(f))
		args = append(args, storageArg(f, v))
		ph = append(ph, "$"+strconv.Itoa(len(args)))
	}
	insert := "INSERT INTO " + layout.Table(e) + " (" + strings.Join(cols, ", ") + ") VALUES (" + strings.Join(ph, ", ") + ")"
	err := pgx.BeginFunc(ctx, s.pool, func(tx pgx.Tx) error {
		if _, err := tx.Exec(ctx, insert, args...); err != nil {
			return err
		}
		if _, err := tx.Exec(ctx, `INSERT INTO registrum.revisions
    (entity_id, record_id, revision, lifecycle, data, package_revision, operation_id, commit_id, created_at)
    VALUES ($1, $2, 1, $3, $4, $5, $6, $7, $8)`,
			e.ID, id, layout.LifecycleActive, string(j.Data), s.pkg.Revision, j.OperationID, j.CommitID, now); err != nil {
			return err
		}
		return appendAudit(ctx, tx, "create", e.ID, j, 1)
	})
	if err != nil {
		return nil, s.writeError(e, err)
	}
	return &Record{Entity: e, ID: id, Revision: 1, Lifecycle: layout.LifecycleActive, CreatedAt: now, UpdatedAt: now, Values: values}, nil
}

func appendAudit(ctx context.Context, tx pgx.Tx, operation, entityID string, j Journal, revision int64) error {
	_, err := tx.Exec(ctx, `INSERT INTO registrum.audit
    (operation, outcome, entity_id, record_reference, revision, principal_reference, trace_id)
    VALUES ($1, 'succeeded', $2, $3, $4, nullif($5, ''), $6)`,
		operation, entityID, j.RecordReference, revision, j.PrincipalReference, j.TraceID)
	return err
}

// Get returns the current state of a record, tombstoned or not.
func (s *Store) Get(ctx context.Context, e *model.Entity, id string) (*Record, error) {
	sel := []string{layout.ColRevision, layout.ColLifecycle, layout.ColCreatedAt, layout.ColUpdatedAt}
	for _, f := range e.Fields {
		sel = append(sel, selectExpr(f))
	}
	q := "SELECT " + strings.Join(sel, ", ") + " FROM " + layout.Table(e) + " WHERE " + layout.ColRecordID + " = $1"
	rec := &Record{Entity: e, ID: id, Values: make(map[string]any, len(e.Fields))}
	raw := make([]any, len(e.Fields))
	dest := []any{&rec.Revision, &rec.Lifecycle, &rec.CreatedAt, &rec.UpdatedAt}
	for i := range raw {
		dest = append(dest, &raw[i])
	}
	if err := s.pool.QueryRow(ctx, q, id).Scan(dest...); err != nil {
		if errors.Is(err, pgx.ErrNoRows) {
			return nil, ErrNotFound
		}
		return nil, fmt.Errorf("store: read %s record: %w", e.ID, err)
	}
	for i, f := range e.Fields {
		rec.Values[f.ID] = fromStorage(f, raw[i])
	}
	rec.CreatedAt, rec.UpdatedAt = rec.CreatedAt.UTC(), rec.UpdatedAt.UTC()
	return rec, nil
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
func storageArg(f *model.Field, v any) any {
	if raw, ok := v.(json.RawMessage); ok {
		return string(raw)
	}
	return v
}

// writeError turns a PostgreSQL constraint violation into a ConstraintError.
func (s *Store) writeError(e *model.Entity, err error) error {
	var pgErr *pgconn.PgError
	if errors.As(err, &pgErr) && strings.HasPrefix(pgErr.Code, "23") {
		owner, ok := s.owners[pgErr.ConstraintName]
		if !ok {
			owner = layout.Owner{EntityID: e.ID, Kind: "integrity"}
			if pgErr.Code == "23505" && pgErr.ConstraintName == layout.TableName(e)+"_pkey" {
				owner.Kind = "identity"
			}
		}
		return &ConstraintError{Owner: owner, SQLState: pgErr.Code}
	}
	return fmt.Errorf("store: write %s record: %w", e.ID, err)
}
