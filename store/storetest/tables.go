package storetest

import (
	"context"
	"strconv"
	"strings"
	"testing"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/registrum/registrum/model"
	"github.com/registrum/registrum/store"
	"github.com/registrum/registrum/store/layout"
)

// Package returns a package of the given entities with its schema
// fingerprint and revision computed.
func Package(t testing.TB, entities ...*model.Entity) *model.Package {
	t.Helper()
	return Complete(t, &model.Package{Format: model.Format, Registry: model.Registry{ID: "test"}, Entities: entities})
}

// Complete computes p's schema fingerprint and revision, as the compiler
// would, and returns p.
func Complete(t testing.TB, p *model.Package) *model.Package {
	t.Helper()
	fp, err := layout.Fingerprint(p)
	if err != nil {
		t.Fatal(err)
	}
	p.SchemaFingerprint = fp
	if p.Revision, err = model.ComputeRevision(p); err != nil {
		t.Fatal(err)
	}
	return p
}

// Open opens the store of package p on pool, migrating its layout; it fails
// the test on error.
func Open(t testing.TB, pool *pgxpool.Pool, p *model.Package) *store.Store {
	t.Helper()
	st, err := store.Open(context.Background(), pool, p)
	if err != nil {
		t.Fatal(err)
	}
	return st
}

// NewTables returns a pool on a fresh database holding the layout of the
// entities.
func NewTables(t testing.TB, entities ...*model.Entity) *pgxpool.Pool {
	t.Helper()
	pool := NewPool(t)
	Open(t, pool, Package(t, entities...))
	return pool
}

// InsertRows inserts rows (storage-form values by field id) into e's table,
// as live records of revision 1 with the given record ids.
func InsertRows(t testing.TB, pool *pgxpool.Pool, e *model.Entity, ids []string, rows []map[string]any) {
	t.Helper()
	cols := []string{layout.ColRecordID, layout.ColRevision, layout.ColLifecycle, layout.ColCreatedAt, layout.ColUpdatedAt, layout.ColPackageRevision}
	for _, f := range e.Fields {
		cols = append(cols, layout.ColumnName(f))
	}
	src := make([][]any, len(rows))
	for i, r := range rows {
		row := []any{ids[i], int64(1), layout.LifecycleActive, "2026-01-01T00:00:00Z", "2026-01-01T00:00:00Z", "rev"}
		for _, f := range e.Fields {
			row = append(row, r[f.ID])
		}
		src[i] = row
	}
	// CopyFrom needs exact Go types per column; a multi-row INSERT with
	// text-cast parameters keeps the test data simple instead.
	batch := &pgx.Batch{}
	for _, row := range src {
		ph := make([]string, len(cols))
		for j := range cols {
			ph[j] = "$" + strconv.Itoa(j+1)
		}
		batch.Queue("INSERT INTO "+layout.Table(e)+" ("+strings.Join(cols, ", ")+") VALUES ("+strings.Join(ph, ", ")+")", row...)
	}
	if err := pool.SendBatch(context.Background(), batch).Close(); err != nil {
		t.Fatalf("insert rows: %v", err)
	}
}
