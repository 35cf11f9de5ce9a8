package query_test

import (
	"context"
	"errors"
	"os"
	"strconv"
	"strings"
	"testing"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/registrum/registrum/host/problem"
	"github.com/registrum/registrum/model"
	"github.com/registrum/registrum/store"
	"github.com/registrum/registrum/store/layout"
	"github.com/registrum/registrum/store/query"
	"github.com/registrum/registrum/store/storetest"
)

func TestMain(m *testing.M) { os.Exit(storetest.Run(m)) }

func intp(v int) *int { return &v }

// personEntity has a field of every type; "secret" is readable by nobody,
// "hidden" readable but neither filterable nor sortable.
func personEntity() *model.Entity {
	return &model.Entity{ID: "person", Route: "people", MutationMode: model.Mutable, Fields: []*model.Field{
		{ID: "name", APIName: "name", Type: model.TypeString, MaxLength: intp(40)},
		{ID: "note", APIName: "note", Type: model.TypeText},
		{ID: "status", APIName: "status", Type: model.TypeCode, Values: []string{"active", "paused", "closed", "a_b", "50%"}},
		{ID: "age", APIName: "age", Type: model.TypeInteger},
		{ID: "amount", APIName: "amount", Type: model.TypeDecimal, Precision: intp(8), Scale: intp(2)},
		{ID: "born", APIName: "born", Type: model.TypeDate},
		{ID: "seen", APIName: "seen", Type: model.TypeTimestamp},
		{ID: "flag", APIName: "flag", Type: model.TypeBoolean},
		{ID: "ext", APIName: "ext", Type: model.TypeUUID},
		{ID: "where", APIName: "where", Type: model.TypeCRS84Point},
		{ID: "extra", APIName: "extra", Type: model.TypeStructured},
		{ID: "hidden", APIName: "hidden", Type: model.TypeString, MaxLength: intp(10)},
		{ID: "secret", APIName: "secret", Type: model.TypeString, MaxLength: intp(10)},
	}}
}

// itemEntity has an index on its kind field.
func itemEntity() *model.Entity {
	return &model.Entity{ID: "item", Route: "items", MutationMode: model.Mutable,
		Fields: []*model.Field{
			{ID: "kind", APIName: "kind", Type: model.TypeString, MaxLength: intp(10)},
			{ID: "n", APIName: "n", Type: model.TypeInteger},
		},
		Indexes: []*model.Index{{ID: "by-kind", Fields: []string{"kind"}}},
	}
}

var everything = []string{"name", "note", "status", "age", "amount", "born", "seen", "flag", "ext", "where", "extra"}

// fullAllowed reads, filters and sorts every field but "hidden" (read only)
// and "secret" (withheld), and allows $count.
func fullAllowed() query.Allowed {
	return query.Allowed{
		Readable:   append(append([]string{}, everything...), "hidden"),
		Filterable: everything,
		Sortable:   []string{"name", "note", "status", "age", "amount", "born", "seen", "flag", "ext"},
		AllowCount: true,
	}
}

func testPackage(t testing.TB, entities ...*model.Entity) *model.Package {
	t.Helper()
	p := &model.Package{Format: model.Format, Registry: model.Registry{ID: "test"}, Entities: entities}
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

// openDB returns a pool on a fresh database holding the layout of the entities.
func openDB(t testing.TB, entities ...*model.Entity) *pgxpool.Pool {
	t.Helper()
	pool := storetest.NewPool(t)
	if _, err := store.Open(context.Background(), pool, testPackage(t, entities...)); err != nil {
		t.Fatal(err)
	}
	return pool
}

// insertRows copies rows (storage-form values by field id) into e's table.
func insertRows(t testing.TB, pool *pgxpool.Pool, e *model.Entity, ids []string, rows []map[string]any) {
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

// wantProblem checks that err is a *problem.Error with code and a detail
// containing every fragment.
func wantProblem(t *testing.T, err error, code problem.Code, fragments ...string) {
	t.Helper()
	var pe *problem.Error
	if !errors.As(err, &pe) {
		t.Fatalf("want a %s problem, got %v", code, err)
	}
	if pe.Code != code {
		t.Fatalf("want code %s, got %s (%s)", code, pe.Code, pe.Detail)
	}
	for _, f := range fragments {
		if !strings.Contains(pe.Detail, f) {
			t.Fatalf("detail %q does not contain %q", pe.Detail, f)
		}
	}
}

func opts(kv ...string) query.RawOptions {
	o := query.RawOptions{}
	for i := 0; i < len(kv); i += 2 {
		o[kv[i]] = append(o[kv[i]], kv[i+1])
	}
	return o
}
