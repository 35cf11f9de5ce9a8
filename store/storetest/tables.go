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

// SamplePackage is the package of the store's own tests, which the snapshot
// report (bench/) loads too: households (a required name of at most 10
// characters); children with a unique national id, a reference to their
// household, fields of the other storage types and a GeoJSON point; and
// placements whose date periods must not overlap per child.
func SamplePackage(t testing.TB) *model.Package {
	t.Helper()
	p := &model.Package{
		Format:   model.Format,
		Registry: model.Registry{ID: "test"},
		Entities: []*model.Entity{
			{ID: "household", Route: "households", MutationMode: model.Mutable, Fields: []*model.Field{
				{ID: "name", APIName: "name", Type: model.TypeString, Required: true, MaxLength: sampleInt(10)},
			}},
			{ID: "child", Route: "children", MutationMode: model.Mutable, Fields: []*model.Field{
				{ID: "national-id", APIName: "nationalId", Type: model.TypeString, Required: true, MaxLength: sampleInt(20)},
				{ID: "household", APIName: "household", Type: model.TypeReference, Target: "household"},
				{ID: "age", APIName: "age", Type: model.TypeInteger},
				{ID: "amount", APIName: "amount", Type: model.TypeDecimal, Precision: sampleInt(10), Scale: sampleInt(2)},
				{ID: "born", APIName: "born", Type: model.TypeDate},
				{ID: "seen", APIName: "seen", Type: model.TypeTimestamp},
				{ID: "active", APIName: "active", Type: model.TypeBoolean},
				{ID: "where", APIName: "where", Type: model.TypeCRS84Point},
			}, Constraints: []*model.Constraint{{ID: "unique-nid", Kind: model.ConstraintUnique, Fields: []string{"national-id"}}},
				GeoJSON: &model.GeoJSON{GeometryField: "where"}},
			{ID: "placement", Route: "placements", MutationMode: model.Mutable,
				Temporal: &model.Temporal{StartField: "from", EndField: "to", Type: model.TypeDate},
				Fields: []*model.Field{
					{ID: "child", APIName: "child", Type: model.TypeString, Required: true},
					{ID: "from", APIName: "from", Type: model.TypeDate, Required: true},
					{ID: "to", APIName: "to", Type: model.TypeDate},
				},
				Constraints: []*model.Constraint{{ID: "no-overlap", Kind: model.ConstraintTemporalNonOverlap, ScopeFields: []string{"child"}}}},
		},
	}
	return Complete(t, p)
}

// sampleInt returns a pointer to v.
func sampleInt(v int) *int { return &v }

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
	st, err := store.Open(context.Background(), pool, p, store.Options{})
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
