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
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/registrum/registrum/host/hosttest"
	"github.com/registrum/registrum/issuer/issuertest"
	"github.com/registrum/registrum/model/query"
	"github.com/registrum/registrum/store"
	"github.com/registrum/registrum/store/layout"
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

// and is the outcome of the phases m and n together: their operations over
// their time, and the larger of each latency (a percentile of the two
// phases' latencies together cannot be told from theirs alone; the larger
// is the one a goal is held to).
func (m measured) and(n measured) measured {
	return measured{ops: m.ops + n.ops, seconds: m.seconds + n.seconds,
		p50: max(m.p50, n.p50), p99: max(m.p99, n.p99), failures: m.failures + n.failures}
}

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
	// The floors' pool is the host's: store.Connect sizes it
	// (store.DefaultMaxConns unless the DSN says otherwise), and the floors
	// read and write through the store's own statements.
	pool, err := store.Connect(ctx, dsn)
	if err != nil {
		t.Fatal(err)
	}
	defer pool.Close()
	st := storetest.Open(t, pool, h.Package())
	item := h.Package().EntityByID("item")

	var seq atomic.Int64

	// Creates. The floor: the rows the host's create (no Idempotency-Key)
	// writes, by the store's statements (SQLCreateRecord, SQLAppendRevision,
	// SQLAppendAudit), sent as one round trip from BEGIN to COMMIT.
	// Every phase starts warm, on both sides: the pools' connections open,
	// their statements prepared and the tables' pages cached by an
	// unmeasured second of the same load. Without it the first phase
	// measured the host's cold start (a p99 of 0.5 s from new connections
	// and cold backends) against a floor that ran after it, warm.
	warm := time.Second
	wrkLoad(t, "create-warm-up", srv.URL, clients, warm, token, wrkCreates(fmt.Sprintf("w%d", time.Now().UnixNano())))
	apiCreate := wrkLoad(t, "create", srv.URL, clients, phase, token, wrkCreates(fmt.Sprintf("h%d", time.Now().UnixNano())))
	pkgRev := h.Package().Revision
	itemInsert := store.SQLCreateRecord(item, item.Fields)
	principal := floorRecordRef("principal")
	createRows := func(code string, amount int64) (string, []floorStatement) {
		id, now := uuid.NewString(), floorNow()
		return id, []floorStatement{
			{itemInsert, append([]any{id, now, pkgRev}, fieldValues(item, map[string]any{"code": code, "category": "c", "amount": amount})...), 1},
			{store.SQLAppendRevision, []any{item.ID, id, int64(1), layout.LifecycleActive, fmt.Sprintf(`{"amount":%d,"category":"c","code":%q}`, amount, code), pkgRev, uuid.NewString(), uuid.NewString(), now, nil}, 1},
			{store.SQLAppendAudit, []any{"create", item.ID, floorRecordRef(id), int64(1), principal, floorHex(16)}, 1},
		}
	}
	floorCreate := func(w, i int) error {
		n := seq.Add(1)
		_, stmts := createRows(fmt.Sprintf("p-%d", n), n)
		return pool.AcquireFunc(ctx, func(c *pgxpool.Conn) error { return floorTx(ctx, c.Conn(), stmts) })
	}
	measure(clients, warm, floorCreate)
	dbBefore := databaseCPU()
	baseCreate := measure(clients, phase, floorCreate)
	t.Logf("create floor: PostgreSQL CPU per create %.0f µs", float64((databaseCPU()-dbBefore).Microseconds())/float64(max(baseCreate.ops, 1)))
	// The HTTP ceiling of a create: the same rows in one round trip behind
	// a bare net/http handler (the body decoded as JSON, no
	// authentication, access decision, validation, snapshot or envelope;
	// the record's id and values answered as JSON), driven by the same
	// load generator with the same bodies.
	bareCreateSrv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		var body struct {
			Data struct {
				Code     string `json:"code"`
				Category string `json:"category"`
				Amount   int64  `json:"amount"`
			} `json:"data"`
		}
		if err := json.NewDecoder(r.Body).Decode(&body); err != nil {
			http.Error(w, err.Error(), http.StatusBadRequest)
			return
		}
		id, stmts := createRows(body.Data.Code, body.Data.Amount)
		if err := pool.AcquireFunc(r.Context(), func(c *pgxpool.Conn) error { return floorTx(r.Context(), c.Conn(), stmts) }); err != nil {
			http.Error(w, err.Error(), http.StatusInternalServerError)
			return
		}
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(http.StatusCreated)
		json.NewEncoder(w).Encode(map[string]any{"id": id, "revision": 1, "data": body.Data})
	}))
	defer bareCreateSrv.Close()
	wrkLoad(t, "create-bare-warm-up", bareCreateSrv.URL, clients, warm, token, wrkCreates(fmt.Sprintf("bw%d", time.Now().UnixNano())))
	bareCreate := wrkLoad(t, "create-bare", bareCreateSrv.URL+"/v1/records/items", clients, phase, token, wrkCreates(fmt.Sprintf("b%d", time.Now().UnixNano())))

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
	// The reads start from settled tables: without it, the vacuum the
	// creates above set off ran during the first read phase (the host's)
	// and not during the ones after it.
	settleTables(ctx, pool, "registrum_data.e_item")
	// The HTTP ceiling: the same read behind a bare net/http handler (no
	// authentication, access decision, ETag or envelope; the record's
	// values as JSON), driven by the same load generator. The host and the
	// ceiling take turns in two rounds, each going first once, so that
	// neither is measured only on what the other left behind.
	bare := httptest.NewServer(bareRead(st, item))
	defer bare.Close()
	wrkLoad(t, "read-warm-up", srv.URL, clients, warm, token, wrkPaths(paths))
	wrkLoad(t, "read-bare-warm-up", bare.URL, clients, warm, token, wrkPaths(paths))
	apiRead1 := wrkLoad(t, "read", srv.URL, clients, phase, token, wrkPaths(paths))
	bareRead1 := wrkLoad(t, "read-bare", bare.URL, clients, phase, token, wrkPaths(paths))
	// The read floor is the host's own read: store.Store.Get (the store's
	// record SELECT, sent with pgx, scanned as the host scans it).
	floorRead := func(w, i int) error {
		_, err := st.Get(ctx, item, ids[rand.IntN(len(ids))])
		return err
	}
	measure(clients, warm, floorRead)
	baseRead := measure(clients, phase, floorRead)
	bareRead2 := wrkLoad(t, "read-bare-2", bare.URL, clients, phase, token, wrkPaths(paths))
	apiRead2 := wrkLoad(t, "read-2", srv.URL, clients, phase, token, wrkPaths(paths))
	apiRead, bareRead := apiRead1.and(apiRead2), bareRead1.and(bareRead2)

	// A filtered, sorted page of 50 over many records.
	t0 := time.Now()
	if _, err := pool.Exec(ctx, `INSERT INTO registrum_data.e_item (record_id, revision, lifecycle, created_at, updated_at, package_revision, f_code, f_category, f_amount)
		SELECT gen_random_uuid(), 1, 'active', now(), now(), $1, 'bulk-' || g, chr(97 + g % 10), (g::bigint * 7919) % 1000003 FROM generate_series(1, $2) g`, pkgRev, rows); err != nil {
		t.Fatal(err)
	}
	// Vacuumed, analyzed and checkpointed before either side reads it:
	// with ANALYZE alone, the vacuum a million inserted rows set off ran
	// during the first page phase (the host's).
	settleTables(ctx, pool, "registrum_data.e_item")
	load := time.Since(t0)
	q := url.Values{"$filter": {"category eq 'c' and amount ge 1000"}, "$orderby": {"amount desc"}, "$top": {"50"}}
	pagePath := []string{"/v1/records/items?" + q.Encode()}
	// The page floor is the store's own page read (store.Store.Page: the
	// statement the same compiler builds from the same options, in the
	// scope of a profile without row boundaries, sent with pgx).
	pq, err := query.Parse(item, query.Allowed{Readable: []string{"code", "category", "amount", "note"}, Filterable: []string{"category", "amount"}, Sortable: []string{"amount"}}, query.RawOptions(q))
	if err != nil {
		t.Fatal(err)
	}
	scope, err := store.Scope(item, nil)
	if err != nil {
		t.Fatal(err)
	}
	floorPage := func(w, i int) error {
		recs, err := st.Page(ctx, pq, scope)
		if err == nil && len(recs) != pq.Limit() {
			err = fmt.Errorf("%d rows", len(recs))
		}
		return err
	}
	// Two rounds taking turns at going first, as the reads above.
	wrkLoad(t, "page-warm-up", srv.URL, clients, warm, token, wrkPaths(pagePath))
	measure(clients, warm, floorPage)
	apiPage1 := wrkLoad(t, "page", srv.URL, clients, phase, token, wrkPaths(pagePath))
	basePage1 := measure(clients, phase, floorPage)
	basePage2 := measure(clients, phase, floorPage)
	apiPage2 := wrkLoad(t, "page-2", srv.URL, clients, phase, token, wrkPaths(pagePath))
	apiPage, basePage := apiPage1.and(apiPage2), basePage1.and(basePage2)

	line := func(name string, api, base measured) string {
		return fmt.Sprintf("| %s | %.0f/s (p50 %v, p99 %v, %d failed) | %.0f/s (p50 %v, p99 %v) | %.2f |",
			name, api.rate(), api.p50.Round(time.Microsecond*10), api.p99.Round(time.Microsecond*10), api.failures,
			base.rate(), base.p50.Round(time.Microsecond*10), base.p99.Round(time.Microsecond*10), api.rate()/base.rate())
	}
	t.Logf("\n%d concurrent clients, %s per phase, %d bulk rows loaded and settled in %v, pools of %d connections, load average %s\n| phase | record host over HTTP | pgx baseline | ratio |\n|---|---|---|---|\n%s\n%s\n%s\n%s\n%s\n%s\n%s",
		clients, phase, rows, load.Round(time.Millisecond), pool.Config().MaxConns, loadAverage(),
		line("create (floor: the same SQL with pgx, one round trip; goal ≥ 0.85)", apiCreate, baseCreate),
		line("create: bare net/http handler + the same SQL (HTTP ceiling)", bareCreate, baseCreate),
		line("create against the HTTP ceiling", apiCreate, bareCreate),
		line("read one", apiRead, baseRead), line("read one: bare net/http handler + the same pgx read (HTTP ceiling)", bareRead, baseRead),
		line("read one against the HTTP ceiling (goal ≥ 0.90)", apiRead, bareRead),
		line("page of 50, filtered and sorted (floor: the same SQL with pgx; goal ≥ 0.40, p99 < 25 ms)", apiPage, basePage))
	t.Logf("by round (each row above is both rounds: operations over time, the larger p99): read against the HTTP ceiling %.2f host first, %.2f ceiling first; page %.2f host first (p99 %v against %v), %.2f floor first (p99 %v against %v)",
		apiRead1.rate()/bareRead1.rate(), apiRead2.rate()/bareRead2.rate(),
		apiPage1.rate()/basePage1.rate(), apiPage1.p99.Round(10*time.Microsecond), basePage1.p99.Round(10*time.Microsecond),
		apiPage2.rate()/basePage2.rate(), apiPage2.p99.Round(10*time.Microsecond), basePage2.p99.Round(10*time.Microsecond))
	if apiCreate.failures+apiRead.failures+apiPage.failures+bareCreate.failures > 0 {
		t.Errorf("some requests failed")
	}
}
