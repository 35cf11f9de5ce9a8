package bench

import (
	"context"
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"net/http"
	"net/http/httptest"
	"net/url"
	"os"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/registrum/registrum/host/hosttest"
	"github.com/registrum/registrum/issuer/issuertest"
	"github.com/registrum/registrum/store/storetest"
)

// measured is the outcome of one timed phase.
type measured struct {
	ops      int64
	seconds  float64
	p50, p99 time.Duration
	failures int64
}

func (m measured) rate() float64 { return float64(m.ops) / m.seconds }

// measure runs fn from workers goroutines for d and reports the rate and latencies.
func measure(workers int, d time.Duration, fn func(worker, i int) error) measured {
	var ops, failures atomic.Int64
	lat := make([][]time.Duration, workers)
	deadline := time.Now().Add(d)
	start := time.Now()
	var wg sync.WaitGroup
	for w := 0; w < workers; w++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := 0; time.Now().Before(deadline); i++ {
				t0 := time.Now()
				if err := fn(w, i); err != nil {
					failures.Add(1)
					continue
				}
				lat[w] = append(lat[w], time.Since(t0))
				ops.Add(1)
			}
		}()
	}
	wg.Wait()
	all := slices.Concat(lat...)
	slices.Sort(all)
	m := measured{ops: ops.Load(), seconds: time.Since(start).Seconds(), failures: failures.Load()}
	if len(all) > 0 {
		m.p50 = all[len(all)/2]
		m.p99 = all[len(all)*99/100]
	}
	return m
}

// TestPerformanceReport measures the record host over loopback HTTP against
// the same SQL statements run directly with pgx. It runs only with
// REGISTRUM_HOST_BENCH=1 (see docs/performance.md).
func TestPerformanceReport(t *testing.T) {
	if os.Getenv("REGISTRUM_HOST_BENCH") != "1" {
		t.Skip("set REGISTRUM_HOST_BENCH=1 to run the record host performance report")
	}
	const clients = 32
	phase := 5 * time.Second
	rows := 1_000_000
	if v := os.Getenv("REGISTRUM_HOST_BENCH_ROWS"); v != "" {
		fmt.Sscan(v, &rows)
	}
	ctx := context.Background()
	is, auth := hosttest.TokenIssuer(t)
	dsn := storetest.NewDatabase(t)
	cfg := hosttest.Deployment(t, "testdata/perf", dsn, auth)
	h, srv := hosttest.Serve(t, cfg)
	token := "Bearer " + is.Token(t, issuertest.StandardClientID)
	pool, err := pgxpool.New(ctx, dsn)
	if err != nil {
		t.Fatal(err)
	}
	defer pool.Close()

	var seq atomic.Int64

	// Creates.
	apiCreate := wrkLoad(t, "create", srv.URL, clients, phase, token, wrkCreates(fmt.Sprintf("h%d", time.Now().UnixNano())))
	pkgRev := h.Package().Revision
	baseCreate := measure(clients, phase, func(w, i int) error {
		id := uuid.NewString()
		return pgx.BeginFunc(ctx, pool, func(tx pgx.Tx) error {
			now := time.Now()
			if _, err := tx.Exec(ctx, `INSERT INTO registrum_data.e_item (record_id, revision, lifecycle, created_at, updated_at, package_revision, f_code, f_category, f_amount) VALUES ($1, 1, 'active', $2, $2, $3, $4, $5, $6)`,
				id, now, pkgRev, fmt.Sprintf("p-%d", seq.Add(1)), "c", int64(i)); err != nil {
				return err
			}
			if _, err := tx.Exec(ctx, `INSERT INTO registrum.revisions (entity_id, record_id, revision, lifecycle, data, package_revision, operation_id, commit_id, created_at, change_context) VALUES ($1, $2, 1, 'active', $3, $4, $5, $6, $7, NULL)`,
				"item", id, `{"amount":1,"category":"c","code":"x"}`, pkgRev, uuid.NewString(), uuid.NewString(), now); err != nil {
				return err
			}
			_, err := tx.Exec(ctx, `INSERT INTO registrum.audit (operation, outcome, entity_id, record_reference, revision, principal_reference, trace_id) VALUES ('create', 'succeeded', 'item', $1, 1, $2, $3)`,
				"hmac-sha256:"+strings.Repeat("0", 64), "hmac-sha256:"+strings.Repeat("1", 64), strings.Repeat("a", 32))
			return err
		})
	})

	// Single-record reads.
	var ids []string
	r, err := pool.Query(ctx, "SELECT record_id::text FROM registrum_data.e_item LIMIT 10000")
	if err != nil {
		t.Fatal(err)
	}
	for r.Next() {
		var id string
		r.Scan(&id)
		ids = append(ids, id)
	}
	r.Close()
	paths := make([]string, len(ids))
	for i, id := range ids {
		paths[i] = "/v1/records/items/" + id
	}
	rand.Shuffle(len(paths), func(i, j int) { paths[i], paths[j] = paths[j], paths[i] })
	apiRead := wrkLoad(t, "read", srv.URL, clients, phase, token, wrkPaths(paths))
	readOne := func(id string) (map[string]any, error) {
		var rev int64
		var lc string
		var ct, ut time.Time
		var code, cat string
		var amount *int64
		var note *string
		err := pool.QueryRow(ctx, `SELECT revision, lifecycle, created_at, updated_at, f_code, f_category, f_amount, f_note FROM registrum_data.e_item WHERE record_id = $1`,
			id).Scan(&rev, &lc, &ct, &ut, &code, &cat, &amount, &note)
		return map[string]any{"id": id, "revision": rev, "code": code, "category": cat, "amount": amount, "note": note}, err
	}
	baseRead := measure(clients, phase, func(w, i int) error {
		_, err := readOne(ids[rand.IntN(len(ids))])
		return err
	})
	// The HTTP ceiling: the same statement behind a bare net/http handler
	// (no authentication, access decision, ETag or envelope), driven by the
	// same load generator.
	bare := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		rec, err := readOne(strings.TrimPrefix(r.URL.Path, "/v1/records/items/"))
		if err != nil {
			http.Error(w, err.Error(), http.StatusNotFound)
			return
		}
		w.Header().Set("Content-Type", "application/json")
		json.NewEncoder(w).Encode(rec)
	}))
	defer bare.Close()
	bareRead := wrkLoad(t, "read-bare", bare.URL, clients, phase, token, wrkPaths(paths))

	// A filtered, sorted page of 50 over many records.
	t0 := time.Now()
	if _, err := pool.Exec(ctx, `INSERT INTO registrum_data.e_item (record_id, revision, lifecycle, created_at, updated_at, package_revision, f_code, f_category, f_amount)
		SELECT gen_random_uuid(), 1, 'active', now(), now(), $1, 'bulk-' || g, chr(97 + g % 10), (g::bigint * 7919) % 1000003 FROM generate_series(1, $2) g`, pkgRev, rows); err != nil {
		t.Fatal(err)
	}
	pool.Exec(ctx, "ANALYZE registrum_data.e_item")
	load := time.Since(t0)
	q := url.Values{"$filter": {"category eq 'c' and amount ge 1000"}, "$orderby": {"amount desc"}, "$top": {"50"}}
	apiPage := wrkLoad(t, "page", srv.URL, clients, phase, token, wrkPaths([]string{"/v1/records/items?" + q.Encode()}))
	basePage := measure(clients, phase, func(w, i int) error {
		rs, err := pool.Query(ctx, `SELECT record_id::text, revision, lifecycle, created_at, updated_at, f_code, f_category, f_amount, f_note FROM registrum_data.e_item
			WHERE lifecycle = 'active' AND f_category = $1::text AND f_amount >= $2::bigint ORDER BY f_amount DESC, record_id DESC LIMIT 51`, "c", int64(1000))
		if err != nil {
			return err
		}
		n := 0
		for rs.Next() {
			n++
		}
		rs.Close()
		if n != 51 {
			return fmt.Errorf("%d rows", n)
		}
		return rs.Err()
	})

	line := func(name string, api, base measured) string {
		return fmt.Sprintf("| %s | %.0f/s (p50 %v, p99 %v, %d failed) | %.0f/s (p50 %v, p99 %v) | %.2f |",
			name, api.rate(), api.p50.Round(time.Microsecond*10), api.p99.Round(time.Microsecond*10), api.failures,
			base.rate(), base.p50.Round(time.Microsecond*10), base.p99.Round(time.Microsecond*10), api.rate()/base.rate())
	}
	t.Logf("\n%d concurrent clients, %s per phase, %d bulk rows loaded in %v\n| phase | record host over HTTP | pgx baseline | ratio |\n|---|---|---|---|\n%s\n%s\n%s\n%s",
		clients, phase, rows, load.Round(time.Millisecond),
		line("create", apiCreate, baseCreate),
		line("read one", apiRead, baseRead), line("read one: bare net/http handler + pgx (HTTP ceiling)", bareRead, baseRead), line("page of 50, filtered and sorted", apiPage, basePage))
	if apiCreate.failures+apiRead.failures+apiPage.failures > 0 {
		t.Errorf("some requests failed")
	}
}
