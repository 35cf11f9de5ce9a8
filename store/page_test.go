package store_test

import (
	"context"
	"encoding/json"
	"fmt"
	"reflect"
	"syscall"
	"testing"
	"time"

	"github.com/google/uuid"

	"github.com/registrum/registrum/model"
	"github.com/registrum/registrum/model/query"
	"github.com/registrum/registrum/store"
)

// pageChildren creates n children of the sample package through the store,
// every third with only its required field (the others NULL), and returns
// their ids.
func pageChildren(t testing.TB, s *store.Store, child *model.Entity, n int) []string {
	t.Helper()
	ctx := context.Background()
	hh := s.Package().EntityByID("household")
	household := uuid.NewString()
	if _, err := s.Create(ctx, hh, household, map[string]any{"name": "H"}, journal()); err != nil {
		t.Fatal(err)
	}
	ids := make([]string, n)
	for i := range ids {
		ids[i] = uuid.NewString()
		values := map[string]any{"national-id": fmt.Sprintf("N-%05d", i)}
		if i%3 != 0 {
			values["household"] = household
			values["age"] = int64(i * 1000)
			values["amount"] = fmt.Sprintf("%d.%02d", i, i%100)
			values["born"] = "2019-02-28"
			values["seen"] = time.Date(2026, 3, 1, 12, 30, 0, 123456000, time.UTC).Add(time.Duration(i) * time.Minute)
			values["active"] = i%2 == 0
			values["where"] = json.RawMessage(fmt.Sprintf(`{"type":"Point","coordinates":[%d.25,-%d.5]}`, i%180, i%90))
		}
		if _, err := s.Create(ctx, child, ids[i], values, journal()); err != nil {
			t.Fatal(err)
		}
	}
	return ids
}

// childPage is the query of a page of every child's fields, n at most.
func childPage(t testing.TB, child *model.Entity, n int) *query.Query {
	t.Helper()
	allowed := query.Allowed{Readable: []string{"national-id", "household", "age", "amount", "born", "seen", "active", "where"}, MaxTop: n}
	q, err := query.Build(child, allowed, query.Canonical{Top: n})
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
	s, _ := openStore(t)
	child := s.Package().EntityByID("child")
	ids := pageChildren(t, s, child, 40)
	scope, err := store.Scope(child, nil)
	if err != nil {
		t.Fatal(err)
	}
	recs, err := s.Page(ctx, childPage(t, child, 100), scope)
	if err != nil {
		t.Fatal(err)
	}
	if len(recs) != len(ids) {
		t.Fatalf("page of %d records, want %d", len(recs), len(ids))
	}
	seen := map[string]bool{}
	for _, got := range recs {
		want, err := s.Get(ctx, child, got.ID)
		if err != nil {
			t.Fatalf("record %s of the page: %v", got.ID, err)
		}
		seen[got.ID] = true
		if got.Entity != child || got.Revision != want.Revision || got.Lifecycle != want.Lifecycle ||
			!got.CreatedAt.Equal(want.CreatedAt) || !got.UpdatedAt.Equal(want.UpdatedAt) ||
			got.CreatedAt.Location() != time.UTC || got.UpdatedAt.Location() != time.UTC {
			t.Errorf("record %s: page %+v, single read %+v", got.ID, *got, *want)
		}
		if len(got.Values) != len(child.Fields) {
			t.Errorf("record %s: %d values in the page, want one per field (%d)", got.ID, len(got.Values), len(child.Fields))
		}
		for _, f := range child.Fields {
			g, w := got.Values[f.ID], want.Values[f.ID]
			if reflect.TypeOf(g) != reflect.TypeOf(w) || !reflect.DeepEqual(g, w) {
				t.Errorf("record %s, %s: page %T %v, single read %T %v", got.ID, f.ID, g, g, w, w)
			}
		}
	}
	if len(seen) != len(ids) {
		t.Errorf("%d distinct records in the page, want %d", len(seen), len(ids))
	}
}

// BenchmarkPage reads a page of 1,000 records with a value of every storage
// type (a third with NULLs) through store.Store.Page. Beside the wall time,
// which PostgreSQL's part dominates, it reports the test process's CPU per
// page (cpu-µs/op: the scan, pgx's decoding and the collector):
//
//	go test -run '^$' -bench BenchmarkPage -benchmem ./store/
func BenchmarkPage(b *testing.B) {
	ctx := context.Background()
	s, _ := openStore(b)
	child := s.Package().EntityByID("child")
	pageChildren(b, s, child, 1000)
	q := childPage(b, child, 1000)
	scope, err := store.Scope(child, nil)
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
