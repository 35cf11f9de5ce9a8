package store

import (
	"context"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/registrum/registrum/model"
	"github.com/registrum/registrum/model/query"
	"github.com/registrum/registrum/store/layout"
	"github.com/registrum/registrum/store/querysql"
)

// Boundary is one row boundary: the record's field must equal one of
// Values, given in storage form (string, int64, bool or time.Time).
type Boundary struct {
	FieldID string
	Values  []any
}

// Scope returns the condition every record of a collection read meets: live,
// and inside every boundary. Placeholders start at $1.
func Scope(e *model.Entity, boundaries []Boundary) (querysql.Fragment, error) {
	parts := []string{layout.ColLifecycle + " = '" + layout.LifecycleActive + "'"}
	var args []any
	for _, b := range boundaries {
		f := e.Field(b.FieldID)
		if f == nil {
			return querysql.Fragment{}, fmt.Errorf("store: row boundary on unknown field %q of %s", b.FieldID, e.ID)
		}
		typ, err := layout.SQLType(f)
		if err != nil {
			return querysql.Fragment{}, err
		}
		if i := strings.IndexByte(typ, '('); i >= 0 {
			typ = typ[:i]
		}
		arr, err := typedArray(b.Values)
		if err != nil {
			return querysql.Fragment{}, fmt.Errorf("store: row boundary on %s.%s: %w", e.ID, f.ID, err)
		}
		args = append(args, arr)
		parts = append(parts, layout.Column(f)+" = ANY($"+strconv.Itoa(len(args))+"::"+typ+"[])")
	}
	return querysql.Fragment{SQL: strings.Join(parts, " AND "), Args: args}, nil
}

// columns returns the select list of an entity's records.
func columns(e *model.Entity) string {
	sel := []string{layout.ColRecordID + "::text", layout.ColRevision, layout.ColLifecycle, layout.ColCreatedAt, layout.ColUpdatedAt}
	for _, f := range e.Fields {
		sel = append(sel, selectExpr(f))
	}
	return strings.Join(sel, ", ")
}

// Page runs one page of a collection read: at most q.Limit() records in
// scope that match the query, in its order.
func (s *Store) Page(ctx context.Context, q *query.Query, scope querysql.Fragment) (_ []*Record, err error) {
	ctx, span := startOp(ctx, spanRead, "Page")
	defer func() { endOp(span, err) }()
	e := q.Entity
	stmt := compilerFor(e).PageStatement(q, columns(e), scope)
	rows, err := s.pool.Query(ctx, stmt.SQL, stmt.Args...)
	if err != nil {
		return nil, fmt.Errorf("store: read %s page: %w", e.ID, err)
	}
	defer rows.Close()
	var out []*Record
	scan := newPageScanner(e, q.Limit())
	for rows.Next() {
		rec, err := scan.scan(rows)
		if err != nil {
			return nil, err
		}
		out = append(out, rec)
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("store: read %s page: %w", e.ID, err)
	}
	return out, nil
}

// Count returns the number of records in scope that match the query's filter.
func (s *Store) Count(ctx context.Context, q *query.Query, scope querysql.Fragment) (_ int64, err error) {
	ctx, span := startOp(ctx, spanRead, "Count")
	defer func() { endOp(span, err) }()
	stmt := compilerFor(q.Entity).CountStatement(q, scope)
	var n int64
	if err := s.pool.QueryRow(ctx, stmt.SQL, stmt.Args...).Scan(&n); err != nil {
		return 0, fmt.Errorf("store: count %s: %w", q.Entity.ID, err)
	}
	return n, nil
}

// typedArray turns storage-form values of one kind into a typed slice pgx
// encodes as an array; no values give an empty text array (no record matches).
func typedArray(values []any) (any, error) {
	if len(values) == 0 {
		return []string{}, nil
	}
	switch values[0].(type) {
	case string:
		return typed[string](values)
	case int64:
		return typed[int64](values)
	case bool:
		return typed[bool](values)
	case time.Time:
		return typed[time.Time](values)
	}
	return nil, fmt.Errorf("values of type %T cannot bound rows", values[0])
}

func typed[T any](values []any) ([]T, error) {
	out := make([]T, len(values))
	for i, v := range values {
		t, ok := v.(T)
		if !ok {
			return nil, fmt.Errorf("mixed value types %T and %T", values[0], v)
		}
		out[i] = t
	}
	return out, nil
}
