package query_test

import (
	"context"
	"net/url"
	"testing"
	"time"

	"github.com/registrum/registrum/host/query"
)

const benchFilter = "status in ('active','paused') and age ge 18 and (startswith(name,'Jo') or born lt 2000-01-01) and not (flag eq false)"

// BenchmarkParseAndWhere measures parsing a typical read (a five-comparison
// filter, an order and a selection) and compiling its page and count
// statements, beside two baselines measured in the same run: decoding the
// same query string with net/url, and one SELECT 1 round trip on the test
// cluster with pgx (the least a read costs). docs/performance/query.md
// reports the ratios.
func BenchmarkParseAndWhere(b *testing.B) {
	e := personEntity()
	a := fullAllowed()
	raw := url.Values{"$filter": {benchFilter}, "$orderby": {"age desc,name"}, "$select": {"name,age,status"}, "$top": {"50"}}.Encode()
	b.Run("query", func(b *testing.B) {
		o := opts("$filter", benchFilter, "$orderby", "age desc,name", "$select", "name,age,status", "$top", "50")
		b.ReportAllocs()
		for b.Loop() {
			q, err := query.Parse(e, a, o)
			if err != nil {
				b.Fatal(err)
			}
			scope := query.Fragment{SQL: "lifecycle = $1", Args: []any{"active"}}
			_ = q.PageStatement("record_id", scope)
			_ = q.CountStatement(scope)
		}
	})
	b.Run("baseline-url.ParseQuery", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			if _, err := url.ParseQuery(raw); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("cursor-seal-open", func(b *testing.B) {
		s := newSealer(b)
		q, _ := query.Parse(e, a, opts("$filter", benchFilter, "$orderby", "age desc,name"))
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
	})
	b.Run("baseline-pgx-SELECT-1", func(b *testing.B) {
		pool := openDB(b, e)
		ctx := context.Background()
		b.ReportAllocs()
		for b.Loop() {
			var n int
			if err := pool.QueryRow(ctx, "SELECT 1").Scan(&n); err != nil {
				b.Fatal(err)
			}
		}
	})
}
