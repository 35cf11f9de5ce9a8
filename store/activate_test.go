package store_test

import (
	"context"
	"errors"
	"strings"
	"testing"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/registrum/registrum/model"
	"github.com/registrum/registrum/store"
	"github.com/registrum/registrum/store/layout"
	"github.com/registrum/registrum/store/storetest"
)

// catalog describes the tables, columns, constraints and indexes of the
// entity schema, independent of column order.
func catalog(t *testing.T, pool *pgxpool.Pool) string {
	t.Helper()
	rows, err := pool.Query(context.Background(), `
SELECT 'column ' || table_name || '.' || column_name || ' ' || data_type || ' ' || is_nullable || coalesce(' ' || numeric_precision || ',' || numeric_scale, '')
  FROM information_schema.columns WHERE table_schema = 'registrum_data'
UNION ALL
SELECT 'constraint ' || conrelid::regclass::text || ' ' || conname || ' ' || pg_get_constraintdef(oid)
  FROM pg_constraint WHERE connamespace = 'registrum_data'::regnamespace
UNION ALL
SELECT 'index ' || indexname || ' ' || indexdef FROM pg_indexes WHERE schemaname = 'registrum_data'
ORDER BY 1`)
	if err != nil {
		t.Fatal(err)
	}
	defer rows.Close()
	var out []string
	for rows.Next() {
		var s string
		if err := rows.Scan(&s); err != nil {
			t.Fatal(err)
		}
		out = append(out, s)
	}
	return strings.Join(out, "\n")
}

// revise applies change to a copy of the test package and recomputes its
// fingerprint and revision.
func revise(t *testing.T, change func(p *model.Package)) *model.Package {
	t.Helper()
	p := testPackage(t)
	change(p)
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

// An activation derives the table changes and applies them in one
// transaction: the tables then are exactly those a fresh database of the
// new package has, stored records keep their values, the old package is
// refused and the new one served. Additive changes apply directly;
// destructive ones are refused, naming each, with nothing changed, unless
// confirmed.
func TestActivationAppliesAdditiveChangesAndRefusesDestructiveOnes(t *testing.T) {
	ctx := context.Background()
	s, pool := openStore(t)
	hh := s.Package().EntityByID("household")
	id := uuid.NewString()
	if _, err := s.Create(ctx, hh, id, map[string]any{"name": "kept"}, journal()); err != nil {
		t.Fatal(err)
	}

	additive := revise(t, func(p *model.Package) {
		hh := p.EntityByID("household")
		hh.Fields = append(hh.Fields, &model.Field{ID: "note", APIName: "note", Type: model.TypeString, MaxLength: intp(30)})
		hh.Fields[0].MaxLength = intp(40) // widened
		hh.Indexes = append(hh.Indexes, &model.Index{ID: "by-name", Fields: []string{"name"}})
		p.Entities = append(p.Entities, &model.Entity{ID: "office", Route: "offices", MutationMode: model.Mutable, Fields: []*model.Field{
			{ID: "title", APIName: "title", Type: model.TypeString, Required: true},
			{ID: "household", APIName: "household", Type: model.TypeReference, Target: "household"},
		}})
	})
	act, err := store.Activate(ctx, pool, additive, false)
	if err != nil {
		t.Fatal(err)
	}
	var described []string
	for _, c := range act.Changes {
		if c.Destructive {
			t.Errorf("destructive: %s", c.Description)
		}
		described = append(described, c.Description)
	}
	for _, want := range []string{"new entity office", "entity household: new optional field note", "entity household: the bounds of field name are widened", "entity household: new index x_e_household__by-name"} {
		if !strings.Contains(strings.Join(described, "\n"), want) {
			t.Errorf("changes lack %q: %q", want, described)
		}
	}
	// A write of the store still bound to the previous package is refused
	// when it takes its snapshot, and nothing of it is committed.
	late := uuid.NewString()
	if _, _, err := s.Write(ctx, nil, func(w *store.Writer) (*store.Outcome, error) {
		if _, err := w.Create(ctx, hh, late, map[string]any{"name": "late"}, journal()); err != nil {
			return nil, err
		}
		_, err := w.Snapshot(ctx)
		return &store.Outcome{}, err
	}); !errors.Is(err, store.ErrPackageChanged) {
		t.Fatalf("a write under the previous package: %v", err)
	}
	if n := count(t, pool, "select count(*) from registrum_data.e_household where record_id = '"+late+"'"); n != 0 {
		t.Fatal("the refused write was committed")
	}
	// The same when the snapshot travels with COMMIT: the statement that
	// reads it refuses, and COMMIT does not run.
	if _, _, err := s.Write(ctx, nil, func(w *store.Writer) (*store.Outcome, error) {
		if _, err := w.Create(ctx, hh, late, map[string]any{"name": "late"}, journal()); err != nil {
			return nil, err
		}
		return &store.Outcome{}, w.TokenAtCommit(ctx, func(string) error {
			t.Error("a refused write's token was delivered")
			return nil
		})
	}); !errors.Is(err, store.ErrPackageChanged) {
		t.Fatalf("a write under the previous package, its snapshot read with COMMIT: %v", err)
	}
	if n := count(t, pool, "select count(*) from registrum_data.e_household where record_id = '"+late+"'"); n != 0 {
		t.Fatal("the refused write was committed with its snapshot")
	}
	fresh := storetest.NewPool(t)
	if _, err := store.Open(ctx, fresh, additive, store.Options{}); err != nil {
		t.Fatal(err)
	}
	if got, want := catalog(t, pool), catalog(t, fresh); got != want {
		t.Fatalf("activated layout\n%s\nfresh layout\n%s", got, want)
	}
	if _, err := store.Open(ctx, pool, testPackage(t), store.Options{}); !errors.Is(err, store.ErrLayoutMismatch) {
		t.Fatalf("the old package after the activation: %v", err)
	}
	s2, err := store.Open(ctx, pool, additive, store.Options{})
	if err != nil {
		t.Fatal(err)
	}
	rec, err := s2.Get(ctx, s2.Package().EntityByID("household"), id)
	if err != nil || rec.Values["name"] != "kept" {
		t.Fatalf("stored record after the activation: %+v %v", rec, err)
	}
	if n := count(t, pool, "select count(*) from registrum.history_schemas"); n != 2 {
		t.Fatalf("%d recorded field descriptors, want 2", n)
	}

	destructive := revise(t, func(p *model.Package) {
		hh := p.EntityByID("household")
		hh.Fields = append(hh.Fields, &model.Field{ID: "note", APIName: "note", Type: model.TypeString, MaxLength: intp(30)})
		hh.Fields[0].MaxLength = intp(5) // narrowed
		ch := p.EntityByID("child")
		ch.Fields = withoutField(ch.Fields, "age")
		ch.Fields = append(ch.Fields, &model.Field{ID: "school", APIName: "school", Type: model.TypeString, Required: true})
	})
	before := catalog(t, pool)
	_, err = store.Activate(ctx, pool, destructive, false)
	var de *store.DestructiveError
	if !errors.As(err, &de) {
		t.Fatalf("destructive activation: %v", err)
	}
	msg := err.Error()
	for _, want := range []string{"entity office is dropped", "entity household: the bounds of field name are narrowed", "entity child: field age is dropped", "entity child: new required field school"} {
		if !strings.Contains(msg, want) {
			t.Errorf("refusal lacks %q:\n%s", want, msg)
		}
	}
	if strings.Contains(msg, "new optional field") {
		t.Errorf("the refusal lists additive changes:\n%s", msg)
	}
	if catalog(t, pool) != before {
		t.Fatal("a refused activation changed the tables")
	}
	// Confirmed: the stored "kept" fits the narrowed bound and no child is
	// stored, so it applies.
	if _, err := store.Activate(ctx, pool, destructive, true); err != nil {
		t.Fatal(err)
	}
	fresh2 := storetest.NewPool(t)
	if _, err := store.Open(ctx, fresh2, destructive, store.Options{}); err != nil {
		t.Fatal(err)
	}
	if got, want := catalog(t, pool), catalog(t, fresh2); got != want {
		t.Fatalf("activated layout\n%s\nfresh layout\n%s", got, want)
	}
	// A confirmed activation that stored values refuse rolls back whole.
	tooNarrow := revise(t, func(p *model.Package) { p.EntityByID("household").Fields[0].MaxLength = intp(2) })
	before = catalog(t, pool)
	if _, err := store.Activate(ctx, pool, tooNarrow, true); err == nil || !strings.Contains(err.Error(), "check constraint") {
		t.Fatalf("an activation stored values violate: %v", err)
	}
	if catalog(t, pool) != before {
		t.Fatal("a failed activation changed the tables")
	}
}

func withoutField(fs []*model.Field, id string) []*model.Field {
	var out []*model.Field
	for _, f := range fs {
		if f.ID != id {
			out = append(out, f)
		}
	}
	return out
}
