package store_test

import (
	"context"
	"encoding/json"
	"fmt"
	"reflect"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/google/uuid"

	"github.com/registrum/registrum/model"
	"github.com/registrum/registrum/model/query"
	"github.com/registrum/registrum/store"
	"github.com/registrum/registrum/store/storetest"
)

// pagePackage is a package with an entity holding a field of every storage
// form a page reads (text, cast to text, JSON, integer, boolean, time) and a
// code field.
func pagePackage(t testing.TB) *model.Package {
	t.Helper()
	maxLabel := 20
	return storetest.Package(t,
		&model.Entity{ID: "household", Route: "households", MutationMode: model.Mutable, Fields: []*model.Field{
			{ID: "name", APIName: "name", Type: model.TypeString, Required: true},
		}},
		&model.Entity{ID: "entry", Route: "entries", MutationMode: model.Mutable, Fields: []*model.Field{
			{ID: "label", APIName: "label", Type: model.TypeString, Required: true, MaxLength: &maxLabel},
			{ID: "colour", APIName: "colour", Type: model.TypeCode, Values: []string{"red", "green", "blue"}},
			{ID: "note", APIName: "note", Type: model.TypeText},
			{ID: "household", APIName: "household", Type: model.TypeReference, Target: "household"},
			{ID: "token", APIName: "token", Type: model.TypeUUID},
			{ID: "age", APIName: "age", Type: model.TypeInteger},
			{ID: "amount", APIName: "amount", Type: model.TypeDecimal},
			{ID: "born", APIName: "born", Type: model.TypeDate},
			{ID: "seen", APIName: "seen", Type: model.TypeTimestamp},
			{ID: "active", APIName: "active", Type: model.TypeBoolean},
			{ID: "where", APIName: "where", Type: model.TypeCRS84Point},
		}})
}

// pageEntries creates n entries through the store, every third with only
// its required field (the others NULL), and returns their ids.
func pageEntries(t testing.TB, s *store.Store, e *model.Entity, n int) []string {
	t.Helper()
	ctx := context.Background()
	hh := s.Package().EntityByID("household")
	household := uuid.NewString()
	if _, err := s.Create(ctx, hh, household, map[string]any{"name": "H"}, journal()); err != nil {
		t.Fatal(err)
	}
	colours := []string{"red", "green", "blue"}
	ids := make([]string, n)
	for i := range ids {
		ids[i] = uuid.NewString()
		values := map[string]any{"label": fmt.Sprintf("N-%05d", i)}
		if i%3 != 0 {
			values["colour"] = colours[i%len(colours)]
			values["note"] = strings.Repeat("ü", i%7)
			values["household"] = household
			values["token"] = uuid.NewString()
			values["age"] = int64(i * 1000)
			values["amount"] = fmt.Sprintf("%d.%02d", i, i%100)
			values["born"] = "2019-02-28"
			values["seen"] = time.Date(2026, 3, 1, 12, 30, 0, 123456000, time.UTC).Add(time.Duration(i) * time.Minute)
			values["active"] = i%2 == 0
			values["where"] = json.RawMessage(fmt.Sprintf(`{"type":"Point","coordinates":[%d.25,-%d.5]}`, i%180, i%90))
		}
		if _, err := s.Create(ctx, e, ids[i], values, journal()); err != nil {
			t.Fatal(err)
		}
	}
	return ids
}

// openPageStore opens a store of pagePackage with n entries.
func openPageStore(t testing.TB, n int) (*store.Store, *model.Entity, []string) {
	t.Helper()
	s, err := store.Open(context.Background(), storetest.NewPool(t), pagePackage(t), store.Options{})
	if err != nil {
		t.Fatal(err)
	}
	e := s.Package().EntityByID("entry")
	return s, e, pageEntries(t, s, e, n)
}

// entryPage is the query of a page of every entry's fields, n at most.
func entryPage(t testing.TB, e *model.Entity, n int) *query.Query {
	t.Helper()
	var readable []string
	for _, f := range e.Fields {
		readable = append(readable, f.ID)
	}
	q, err := query.Build(e, query.Allowed{Readable: readable, MaxTop: n}, query.Canonical{Top: n})
	if err != nil {
		t.Fatal(err)
	}
	return q
}

// TestAPageReadsEachRecordAsASingleReadDoes reads a page of records holding
// a value of every storage type, or NULL, and checks that each record of
// the page is the record store.Store.Get reads: the same id, revision,
// lifecycle, times and values of the same Go types (a NULL field present
// as nil).
func TestAPageReadsEachRecordAsASingleReadDoes(t *testing.T) {
	ctx := context.Background()
	s, e, ids := openPageStore(t, 40)
	scope, err := store.Scope(e, nil)
	if err != nil {
		t.Fatal(err)
	}
	check := func(t *testing.T) {
		recs, err := s.Page(ctx, entryPage(t, e, 100), scope)
		if err != nil {
			t.Fatal(err)
		}
		if len(recs) != len(ids) {
			t.Fatalf("page of %d records, want %d", len(recs), len(ids))
		}
		seen := map[string]bool{}
		for _, got := range recs {
			want, err := s.Get(ctx, e, got.ID)
			if err != nil {
				t.Fatalf("record %s of the page: %v", got.ID, err)
			}
			seen[got.ID] = true
			if got.Entity != e || got.Revision != want.Revision || got.Lifecycle != want.Lifecycle ||
				!got.CreatedAt.Equal(want.CreatedAt) || !got.UpdatedAt.Equal(want.UpdatedAt) ||
				got.CreatedAt.Location() != time.UTC || got.UpdatedAt.Location() != time.UTC {
				t.Errorf("record %s: page %+v, single read %+v", got.ID, *got, *want)
			}
			if len(got.Row) != len(e.Fields) || got.Values != nil {
				t.Errorf("record %s: %d values in the page's row and a map of %d, want one per field (%d) and no map", got.ID, len(got.Row), len(got.Values), len(e.Fields))
			}
			if m := got.ValueMap(); !reflect.DeepEqual(m, want.Values) {
				t.Errorf("record %s: page's values by id %v, single read %v", got.ID, m, want.Values)
			}
			for _, f := range e.Fields {
				// By the entity's field, and by a copy of it (a field of
				// another compilation of the same entity).
				copied := *f
				if g := got.Value(&copied); !reflect.DeepEqual(g, got.Value(f)) {
					t.Errorf("record %s, %s: %v by a copy of the field, %v by the field", got.ID, f.ID, g, got.Value(f))
				}
				g, w := got.Value(f), want.Value(f)
				if reflect.TypeOf(g) != reflect.TypeOf(w) || !reflect.DeepEqual(g, w) || !reflect.DeepEqual(w, want.Values[f.ID]) {
					t.Errorf("record %s, %s: page %T %v, single read %T %v", got.ID, f.ID, g, g, w, w)
				}
			}
		}
		if len(seen) != len(ids) {
			t.Errorf("%d distinct records in the page, want %d", len(seen), len(ids))
		}
	}
	t.Run("as stored", check)
	// A code the field's vocabulary no longer holds (the page shares the
	// vocabulary's codes) is read as stored.
	colour := e.Field("colour")
	colour.Values = colour.Values[:1]
	t.Run("a code outside the vocabulary", check)
}

// BenchmarkPage reads a page of 1,000 records with a value of every storage
// type (a third with NULLs) through store.Store.Page. Beside the wall time,
// which PostgreSQL's part dominates, it reports the test process's CPU per
// page (cpu-µs/op: the scan, pgx's decoding and the collector):
//
//	go test -run '^$' -bench BenchmarkPage -benchmem ./store/
func BenchmarkPage(b *testing.B) {
	ctx := context.Background()
	s, e, _ := openPageStore(b, 1000)
	q := entryPage(b, e, 1000)
	scope, err := store.Scope(e, nil)
	if err != nil {
		b.Fatal(err)
	}
	b.ReportAllocs()
	before := processCPU(b)
	for b.Loop() {
		recs, err := s.Page(ctx, q, scope)
		if err != nil || len(recs) != 1000 {
			b.Fatal(len(recs), err)
		}
	}
	b.ReportMetric(float64((processCPU(b)-before).Microseconds())/float64(b.N), "cpu-µs/op")
}

// processCPU returns the CPU time the test process has used.
func processCPU(b *testing.B) time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		b.Fatal(err)
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}
