package cursor_test

import (
	"testing"
	"time"

	"github.com/registrum/registrum/model/query"
	"github.com/registrum/registrum/model/query/querytest"
)

// BenchmarkSealOpen measures sealing the cursor of a page of the typical
// read of store/querysql's BenchmarkParseAndWhere and opening it again
// (AES-256-GCM, JSON, re-parse of the carried query): once per page.
// docs/performance/query.md reports it.
func BenchmarkSealOpen(b *testing.B) {
	e := personEntity()
	a := fullAllowed()
	s := newSealer(b)
	q, _ := query.Parse(e, a, opts("$filter", querytest.BenchFilter, "$orderby", "age desc,name"))
	now := time.Unix(1_800_000_000, 0)
	last := query.Row{ID: uuidA, Values: map[string]any{"age": int64(30), "name": "Ann"}}
	b.ReportAllocs()
	for b.Loop() {
		tok, err := s.Seal(q, staff, last, now)
		if err != nil {
			b.Fatal(err)
		}
		if _, err := s.Open(tok, e, a, staff, now); err != nil {
			b.Fatal(err)
		}
	}
}
