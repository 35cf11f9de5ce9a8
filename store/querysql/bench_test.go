package querysql_test

import (
	"context"
	"net/url"
	"testing"
	"time"

	"github.com/registrum/registrum/model/query"
	"github.com/registrum/registrum/model/query/querytest"
	"github.com/registrum/registrum/store/querysql"
)

const benchFilter = querytest.BenchFilter

// BenchmarkParseAndWhere measures parsing a typical read (a five-comparison
// filter, an order and a selection) and compiling its page and count
// statements, beside two baselines measured in the same run: decoding the
// same query string with net/url, and one SELECT 1 round trip on the test
// cluster with pgx (the least a read costs). docs/performance/query.md
// reports the ratios. Sealing and opening a cursor is measured by
// host/cursor's BenchmarkSealOpen.
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
			scope := querysql.Fragment{SQL: "lifecycle = $1", Args: []any{"active"}}
			_ = sql.PageStatement(q, "record_id", scope)
			_ = sql.CountStatement(q, scope)
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

// BenchmarkParseAndWhereInterleaved runs, in every iteration, one parse of
// the typical read with its page and count statements, one net/url decoding
// of the same query string and one pgx SELECT 1 round trip, timing each, so
// that a busy machine slows all three alike; it reports each cost and the
// ratios of the query layer to the two baselines.
func BenchmarkParseAndWhereInterleaved(b *testing.B) {
	e := personEntity()
	a := fullAllowed()
	o := opts("$filter", benchFilter, "$orderby", "age desc,name", "$select", "name,age,status", "$top", "50")
	raw := url.Values(o).Encode()
	pool := openDB(b, e)
	ctx := context.Background()
	scope := querysql.Fragment{SQL: "lifecycle = $1", Args: []any{"active"}}
	var tq, tu, tp time.Duration
	n := 0
	for b.Loop() {
		t0 := time.Now()
		q, err := query.Parse(e, a, o)
		if err != nil {
			b.Fatal(err)
		}
		_ = sql.PageStatement(q, "record_id", scope)
		_ = sql.CountStatement(q, scope)
		t1 := time.Now()
		if _, err := url.ParseQuery(raw); err != nil {
			b.Fatal(err)
		}
		t2 := time.Now()
		var one int
		if err := pool.QueryRow(ctx, "SELECT 1").Scan(&one); err != nil {
			b.Fatal(err)
		}
		t3 := time.Now()
		tq, tu, tp = tq+t1.Sub(t0), tu+t2.Sub(t1), tp+t3.Sub(t2)
		n++
	}
	b.ReportMetric(float64(tq.Nanoseconds())/float64(n), "query-ns/op")
	b.ReportMetric(float64(tu.Nanoseconds())/float64(n), "url-ns/op")
	b.ReportMetric(float64(tp.Nanoseconds())/float64(n), "pgx-select1-ns/op")
	b.ReportMetric(float64(tq)/float64(tu), "query/url")
	b.ReportMetric(float64(tq)/float64(tp), "query/pgx-select1")
}
