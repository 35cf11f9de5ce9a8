package bench

import (
	"context"
	"fmt"
	"math"
	"math/rand/v2"
	"os"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/registrum/registrum/host/hosttest"
	"github.com/registrum/registrum/issuer/issuertest"
	"github.com/registrum/registrum/model/query"
	"github.com/registrum/registrum/store"
	"github.com/registrum/registrum/store/querysql"
	"github.com/registrum/registrum/store/storetest"
)

// TestSpatialAdapterReport measures bbox pages of 1,000 features over
// 1,000,000 points at 32 clients: the spatial adapter over loopback HTTP
// (wrk) against the same SQL statement, built by the same compiler, run
// with pgx from 32 goroutines on a pool sized as the host's
// (store.Connect). It runs only with
// REGISTRUM_GIS_BENCH=1 (see docs/performance.md); REGISTRUM_GIS_BENCH_ROWS
// sets another number of points.
func TestSpatialAdapterReport(t *testing.T) {
	if os.Getenv("REGISTRUM_GIS_BENCH") != "1" {
		t.Skip("set REGISTRUM_GIS_BENCH=1 to run the spatial adapter performance report")
	}
	const (
		clients = 32
		limit   = 1000
		boxes   = 1000
	)
	phase := 10 * time.Second
	rows := 1_000_000
	if v := os.Getenv("REGISTRUM_GIS_BENCH_ROWS"); v != "" {
		fmt.Sscan(v, &rows)
	}
	ctx := context.Background()
	is, auth := hosttest.TokenIssuer(t)
	dsn := storetest.NewDatabase(t)
	h, srv := hosttest.Serve(t, hosttest.Deployment(t, "testdata/gisperf", dsn, auth))
	token := "Bearer " + is.Token(t, issuertest.StandardClientID)
	// The floor's pool is sized as the host's (store.Connect).
	pool, err := store.Connect(ctx, dsn)
	if err != nil {
		t.Fatal(err)
	}
	defer pool.Close()

	// Points spread evenly over the world, loaded behind the spatial index.
	t0 := time.Now()
	if _, err := pool.Exec(ctx, `INSERT INTO registrum_data.e_place (record_id, revision, lifecycle, created_at, updated_at, package_revision, f_name, f_kind, f_location)
		SELECT gen_random_uuid(), 1, 'active', now(), now(), $1, 'place-' || g, chr(97 + g % 4),
		       jsonb_build_object('type', 'Point', 'coordinates', jsonb_build_array(round((random() * 360 - 180)::numeric, 6), round((degrees(asin(random() * 2 - 1)))::numeric, 6)))
		FROM generate_series(1, $2) g`, h.Package().Revision, rows); err != nil {
		t.Fatal(err)
	}
	// The load's dirty pages are written before any phase (as the requests
	// report's phases start after a CHECKPOINT): otherwise the first
	// phases share the machine with the checkpointer writing them.
	if _, err := pool.Exec(ctx, "VACUUM ANALYZE registrum_data.e_place"); err != nil {
		t.Fatal(err)
	}
	if _, err := pool.Exec(ctx, "CHECKPOINT"); err != nil {
		t.Fatal(err)
	}
	load := time.Since(t0)

	// Boxes of 12 by 12 degrees away from the poles hold about 2,000 points
	// of a million: every page is full.
	e := h.Package().EntityByID("place")
	allowed := query.Allowed{Readable: []string{"name", "kind", "location"}, MaxTop: limit}
	scope, err := store.Scope(e, nil)
	if err != nil {
		t.Fatal(err)
	}
	// With fewer points (a validation run), the boxes grow so that they
	// hold as many points: their side scales with the square root of the
	// density, up to 60 degrees.
	side := 12
	if rows < 1_000_000 {
		side = min(int(math.Ceil(12*math.Sqrt(1e6/float64(rows)))), 60)
	}
	rng := rand.New(rand.NewPCG(7, 11))
	paths := make([]string, boxes)
	stmts := make([]querysql.Fragment, boxes)
	for i := range boxes {
		w, s := float64(rng.IntN(360-side))-180, float64(rng.IntN(144-side))-66
		bbox := fmt.Sprintf("%g,%g,%g,%g", w, s, w+float64(side), s+float64(side))
		paths[i] = fmt.Sprintf("/v1/gis/collections/places/items?bbox=%s&limit=%d", bbox, limit)
		q, err := query.Build(e, allowed, query.Canonical{Top: limit, BBox: bbox})
		if err != nil {
			t.Fatal(err)
		}
		stmts[i] = querysql.Compiler{}.PageStatement(q, `record_id::text, revision, lifecycle, created_at, updated_at, "f_name", "f_kind", "f_location"::text`, scope)
	}
	// Each page is full: checked once per box before measuring.
	short := 0
	for _, st := range stmts {
		var n int
		if err := pool.QueryRow(ctx, "SELECT count(*) FROM ("+st.SQL+") p", st.Args...).Scan(&n); err != nil {
			t.Fatal(err)
		}
		if n <= limit {
			short++
		}
	}

	var plan []string
	prs, err := pool.Query(ctx, "EXPLAIN (ANALYZE, BUFFERS) "+stmts[0].SQL, stmts[0].Args...)
	if err != nil {
		t.Fatal(err)
	}
	for prs.Next() {
		var l string
		prs.Scan(&l)
		plan = append(plan, l)
	}
	prs.Close()
	t.Logf("plan of one page:\n%s", strings.Join(plan, "\n"))

	basePage, started := pageReader(ctx, pool, stmts, limit)
	// Each phase starts warm, on both sides, after an unmeasured second of
	// the same load (as the record host report's phases do); the floor's
	// CPU per page (its pgx client, PostgreSQL) is logged beside the
	// host's. Three seconds: over a million points a page at 32 clients
	// takes one to two (wrk fails a phase in which no request completed).
	warm := 3 * time.Second
	host := func(name string, conns int, d time.Duration) measured {
		wrkLoad(t, name+" warm-up", srv.URL, conns, warm, token, wrkPaths(paths))
		return wrkLoad(t, name, srv.URL, conns, d, token, wrkPaths(paths))
	}
	// Both sides read the same boxes in the same order, from the first in
	// each phase (wrk starts its script anew).
	floor := func(name string, workers int, d time.Duration) measured {
		started.Store(0)
		measure(workers, warm, basePage)
		started.Store(0)
		before, self := databaseCPU(), processCPU()
		m := measure(workers, d, basePage)
		per := func(d time.Duration) float64 { return float64(d.Microseconds()) / float64(max(m.ops, 1)) }
		t.Logf("%s: CPU per request: pgx client %.1f µs, PostgreSQL %.1f µs", name, per(processCPU()-self), per(databaseCPU()-before))
		return m
	}
	// At 32 clients, two rounds take turns at going first: a million points
	// outgrow PostgreSQL's shared buffers, and what one side's pages leave
	// in them is what the other side reads next.
	api := host("gis-page", clients, phase)
	base := floor("gis-page floor", clients, phase)
	base2 := floor("gis-page floor, round 2", clients, phase)
	api2 := host("gis-page, round 2", clients, phase)
	// One client: the latency of a page without queueing.
	api1 := host("gis-page-1", 1, phase/2)
	base1 := floor("gis-page-1 floor", 1, phase/2)
	line := func(name string, m measured) string {
		return fmt.Sprintf("| %s | %.0f pages/s | %v | %v | %d |", name, m.rate(), m.p50.Round(10*time.Microsecond), m.p99.Round(10*time.Microsecond), m.failures)
	}
	both := func(a, b measured) float64 { return float64(a.ops+b.ops) / (a.seconds + b.seconds) }
	t.Logf("\n%d points loaded and indexed in %v; %d boxes of %dx%d degrees (%d with a short page); %s per phase, pools of %d connections, load average %s\n"+
		"| bbox page of %d features | rate | p50 | p99 | failed |\n|---|---|---|---|---|\n%s\n%s\n%s\n%s\n%s\n%s\n"+
		"at %d clients: rate ratio %.2f over both rounds (%.2f host first, %.2f floor first; goal ≥ 0.95), p99 ratio %.2f and %.2f (goal ≤ 1.2); at 1 client: rate ratio %.2f, p99 ratio %.2f",
		rows, load.Round(time.Second), boxes, side, side, short, phase, pool.Config().MaxConns, loadAverage(), limit,
		line(fmt.Sprintf("spatial adapter over HTTP, %d clients, round 1", clients), api), line(fmt.Sprintf("same SQL with pgx, %d clients, round 1", clients), base),
		line(fmt.Sprintf("same SQL with pgx, %d clients, round 2", clients), base2), line(fmt.Sprintf("spatial adapter over HTTP, %d clients, round 2", clients), api2),
		line("spatial adapter over HTTP, 1 client", api1), line("same SQL with pgx, 1 client", base1),
		clients, both(api, api2)/both(base, base2), api.rate()/base.rate(), api2.rate()/base2.rate(),
		float64(api.p99)/float64(base.p99), float64(api2.p99)/float64(base2.p99), api1.rate()/base1.rate(), float64(api1.p99)/float64(base1.p99))
	if api.failures+api2.failures+base.failures+base2.failures+api1.failures+base1.failures > 0 || short > 0 {
		t.Errorf("failures: %d over HTTP, %d with pgx, %d short pages", api.failures+api2.failures+api1.failures, base.failures+base2.failures+base1.failures, short)
	}
	if api.p99 >= 50*time.Millisecond {
		t.Logf("p99 %v at %d clients is over the 50 ms target", api.p99, clients)
	}
}

// pageReader returns a function reading one bbox page with pgx, for
// measure, and the counter of the pages it has started. Its workers take the
// boxes in the order of stmts from the counter's value, as wrk's
// connections take the paths of wrkPaths: setting the counter to 0 before a
// phase makes the floor read the boxes the host reads in a phase of wrk,
// in the same order.
func pageReader(ctx context.Context, pool *pgxpool.Pool, stmts []querysql.Fragment, limit int) (func(w, i int) error, *atomic.Int64) {
	var next atomic.Int64
	return func(w, i int) error {
		st := stmts[(next.Add(1)-1)%int64(len(stmts))]
		rs, err := pool.Query(ctx, st.SQL, st.Args...)
		if err != nil {
			return err
		}
		n := 0
		for rs.Next() {
			if _, err := rs.Values(); err != nil {
				return err
			}
			n++
		}
		rs.Close()
		if n != limit+1 {
			return fmt.Errorf("%d rows", n)
		}
		return rs.Err()
	}, &next
}
