package bench

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/registrum/registrum/host/hosttest"
	"github.com/registrum/registrum/issuer/issuertest"
	"github.com/registrum/registrum/model"
	"github.com/registrum/registrum/model/query"
	"github.com/registrum/registrum/store"
	"github.com/registrum/registrum/store/layout"
	"github.com/registrum/registrum/store/querysql"
	"github.com/registrum/registrum/store/storetest"
)

// historyAsOf is the instant of the report's :as-of pages: 90 % of the
// loaded records are valid then (see loadHistory).
const historyAsOf = "2025-01-01T00:00:00Z"

// TestHistoryPageReport measures, at 32 clients over loopback HTTP (wrk),
// pages of 50 of a temporal entity with a long history (default 1,000,000
// records × 10 revisions) read three ways through the record host: the
// current-state page (GET /v1/records/terms, the floor of issue #31), the
// :as-of page (asOf where 90 % of the records are valid) and the
// :snapshot page (the latest revision a snapshot sees of each record). It
// runs only with REGISTRUM_HISTORY_BENCH=1; REGISTRUM_HISTORY_BENCH_ROWS
// and REGISTRUM_HISTORY_BENCH_REVISIONS set the size,
// REGISTRUM_HISTORY_BENCH_PAGES the pages walked per read (default 200),
// REGISTRUM_HISTORY_BENCH_ROUNDS the rounds of the three phases (default
// 2; each round's ratios are printed).
// See docs/performance/floors.md.
func TestHistoryPageReport(t *testing.T) {
	if os.Getenv("REGISTRUM_HISTORY_BENCH") != "1" {
		t.Skip("set REGISTRUM_HISTORY_BENCH=1 to run the history page report")
	}
	const clients = 32
	phase := 5 * time.Second
	rows, revisions, pages, rounds := 1_000_000, 10, 200, 2
	for _, v := range []struct {
		name string
		n    *int
	}{{"REGISTRUM_HISTORY_BENCH_ROWS", &rows}, {"REGISTRUM_HISTORY_BENCH_REVISIONS", &revisions}, {"REGISTRUM_HISTORY_BENCH_PAGES", &pages}, {"REGISTRUM_HISTORY_BENCH_ROUNDS", &rounds}} {
		if s := os.Getenv(v.name); s != "" {
			if _, err := fmt.Sscan(s, v.n); err != nil || *v.n < 1 {
				t.Fatalf("%s=%q: a positive integer is expected", v.name, s)
			}
		}
	}
	ctx := context.Background()
	is, auth := hosttest.TokenIssuer(t)
	dsn := storetest.NewDatabase(t)
	h, srv := hosttest.Serve(t, hosttest.Deployment(t, "testdata/historyperf", dsn, auth))
	token := "Bearer " + is.Token(t, issuertest.StandardClientID)

	load, err := loadHistory(ctx, dsn, h.Package().Revision, rows, revisions)
	if err != nil {
		t.Fatal(err)
	}
	explainHistoryPages(ctx, t, dsn, h.Store(), h.Package().EntityByID("term"))

	reads := []struct{ name, first string }{
		{"current-state page (the floor)", "/v1/records/terms?$top=50"},
		{":as-of page", "/v1/records/terms:as-of?" + url.Values{"asOf": {historyAsOf}, "$top": {"50"}}.Encode()},
		{":snapshot page", "/v1/records/terms:snapshot?$top=50"},
	}
	scripts := make([]string, len(reads))
	for i, r := range reads {
		paths, err := walkPages(srv.URL, token, r.first, pages)
		if err != nil {
			t.Fatalf("%s: %v", r.name, err)
		}
		scripts[i] = wrkPaths(paths)
	}
	var b strings.Builder
	fmt.Fprintf(&b, "\n%d records × %d revisions loaded in %v; %d pages of 50 walked per read (the first without a cursor); %d clients, %s per phase, load average before the phases %s\n",
		rows, revisions, load.Round(time.Second), pages, clients, phase, loadAverage())
	b.WriteString("| round | read | pages/s | p50 | p99 | failed | rate / current-state page (goal ≥ 0.50) | p99 under 50 ms |\n|---|---|---|---|---|---|---|---|\n")
	failed := false
	for round := 1; round <= rounds; round++ {
		// Each round starts with another read, so that none always runs
		// first (after the walk, or while the machine's load changes).
		results := make([]measured, len(reads))
		for k := range reads {
			i := (k + round - 1) % len(reads)
			// An unmeasured second first: the phase that ran first measured
			// the host's pool opening its connections (p99 of 0.45 s).
			wrkLoad(t, fmt.Sprintf("history-r%d-%d-warm-up", round, i), srv.URL, clients, time.Second, token, scripts[i])
			results[i] = wrkLoad(t, fmt.Sprintf("history-r%d-%d", round, i), srv.URL, clients, phase, token, scripts[i])
			failed = failed || results[i].failures > 0
		}
		for i, r := range reads {
			m := results[i]
			fmt.Fprintf(&b, "| %d | %s | %.0f | %v | %v | %d | %.2f | %v |\n", round, r.name, m.rate(), m.p50.Round(10*time.Microsecond), m.p99.Round(10*time.Microsecond),
				m.failures, m.rate()/results[0].rate(), m.p99 < 50*time.Millisecond)
		}
	}
	fmt.Fprintf(&b, "load average after the phases %s\n", loadAverage())
	t.Log(b.String())
	if failed {
		t.Error("some requests failed (see the failed column and the phases' logs)")
	}
}

// loadHistory writes rows records of the report's term entity at revision
// revisions, each with its revisions 1 to revisions, straight into the
// store's tables with two INSERT … SELECT statements in one transaction:
// record ids are random (md5 of a counter, as random as the host's) and
// the revisions go in in record-id order, so the revisions' primary key
// grows at its right edge instead of at random. Each batch of 10,000
// records shares one commit id per revision (as a bulk import's chunk
// does). A record starts between 2000 and 2009; 50 % have no end, 40 %
// end in 2030 and 10 % in 2020, so at historyAsOf 90 % are valid. The
// revision data is the wire form of the fields (dates as text, a null end
// absent), as the store writes it.
func loadHistory(ctx context.Context, dsn, pkgRev string, rows, revisions int) (time.Duration, error) {
	pool, err := store.Connect(ctx, dsn)
	if err != nil {
		return 0, err
	}
	defer pool.Close()
	t0 := time.Now()
	stmts := []string{
		`SET LOCAL synchronous_commit = off`,
		`INSERT INTO registrum_data.e_term (record_id, revision, lifecycle, created_at, updated_at, package_revision, f_label, f_starts, f_ends)
SELECT md5(g::text)::uuid, $2::bigint, 'active', now() - interval '1 day' * $2::int, now(), $1, 'term-' || g,
       date '2000-01-01' + (g % 3650),
       CASE WHEN g % 10 < 5 THEN NULL WHEN g % 10 < 9 THEN date '2030-01-01' ELSE date '2020-01-01' END
FROM generate_series(1, $3::int) g ORDER BY 1`,
		`INSERT INTO registrum.revisions (entity_id, record_id, revision, lifecycle, data, package_revision, operation_id, commit_id, created_at)
SELECT 'term', t.record_id, r, 'active',
       jsonb_strip_nulls(jsonb_build_object('label', CASE WHEN r = $2::int THEN t.f_label ELSE t.f_label || ' (revision ' || r || ')' END,
                                            'starts', t.f_starts::text, 'ends', t.f_ends::text)),
       $1, gen_random_uuid(), md5('commit ' || (t.n / 10000) || ' ' || r)::uuid, t.created_at + interval '1 day' * (r - 1)
FROM (SELECT record_id, f_label, f_starts, f_ends, created_at, row_number() OVER (ORDER BY record_id) AS n
      FROM registrum_data.e_term ORDER BY record_id) t
CROSS JOIN LATERAL generate_series(1, $2::int) r`,
	}
	tx, err := pool.Begin(ctx)
	if err != nil {
		return 0, fmt.Errorf("history report: load: %w", err)
	}
	defer tx.Rollback(ctx)
	for i, s := range stmts {
		var args []any
		if i > 0 {
			args = []any{pkgRev, revisions, rows}
			if i == 2 {
				args = args[:2]
			}
		}
		if _, err := tx.Exec(ctx, s, args...); err != nil {
			return 0, fmt.Errorf("history report: load, statement %d: %w", i+1, err)
		}
	}
	if err := tx.Commit(ctx); err != nil {
		return 0, fmt.Errorf("history report: load: %w", err)
	}
	for _, s := range []string{"VACUUM ANALYZE registrum_data.e_term", "VACUUM ANALYZE registrum.revisions"} {
		if _, err := pool.Exec(ctx, s); err != nil {
			return 0, fmt.Errorf("history report: %s: %w", s, err)
		}
	}
	return time.Since(t0), nil
}

// explainHistoryPages logs the plans of the first current-state page, the
// first :as-of page and the first :snapshot page of e: the statements the
// store builds (store.Scope, store.ValidAt, querysql.Compiler.PageStatement
// with the record id as their only column; Store.SnapshotStatement with
// the snapshot of now, as a first :snapshot page takes it).
func explainHistoryPages(ctx context.Context, t *testing.T, dsn string, st *store.Store, e *model.Entity) {
	t.Helper()
	pool, err := store.Connect(ctx, dsn)
	if err != nil {
		t.Fatal(err)
	}
	defer pool.Close()
	q, err := query.Parse(e, query.Allowed{Readable: []string{"label", "starts", "ends"}}, query.RawOptions{"$top": {"50"}})
	if err != nil {
		t.Fatal(err)
	}
	scope, err := store.Scope(e, nil)
	if err != nil {
		t.Fatal(err)
	}
	at, _ := time.Parse(time.RFC3339, historyAsOf)
	asOf, err := store.ValidAt(e, scope, at)
	if err != nil {
		t.Fatal(err)
	}
	snap, err := st.CurrentSnapshot(ctx)
	if err != nil {
		t.Fatal(err)
	}
	current := querysql.Compiler{}.PageStatement(q, layout.ColRecordID+"::text", scope)
	validAt := querysql.Compiler{}.PageStatement(q, layout.ColRecordID+"::text", asOf)
	snapSQL, snapArgs := st.SnapshotStatement(e, snap, "", 51)
	for _, p := range []struct {
		name string
		sql  string
		args []any
	}{
		{"current-state page", current.SQL, current.Args},
		{":as-of page", validAt.SQL, validAt.Args},
		{":snapshot page", snapSQL, snapArgs},
	} {
		rs, err := pool.Query(ctx, "EXPLAIN (ANALYZE, BUFFERS) "+p.sql, p.args...)
		if err != nil {
			t.Fatalf("explain the %s: %v", p.name, err)
		}
		var plan []string
		for rs.Next() {
			var l string
			if err := rs.Scan(&l); err != nil {
				t.Fatal(err)
			}
			plan = append(plan, l)
		}
		rs.Close()
		t.Logf("plan of the first %s (%s):\n%s", p.name, p.sql, strings.Join(plan, "\n"))
	}
}

// walkPages reads the page at first and the next ones by their cursors,
// n pages in all (fewer at the end of the collection), each a full page of
// 50 but the last of the collection, and returns their paths for wrk.
func walkPages(base, token, first string, n int) ([]string, error) {
	route, _, _ := strings.Cut(first, "?")
	paths := []string{first}
	for len(paths) < n {
		req, err := http.NewRequest(http.MethodGet, base+paths[len(paths)-1], nil)
		if err != nil {
			return nil, err
		}
		req.Header.Set("Authorization", token)
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			return nil, fmt.Errorf("walk: %w", err)
		}
		body, err := io.ReadAll(resp.Body)
		resp.Body.Close()
		if err != nil {
			return nil, fmt.Errorf("walk: %w", err)
		}
		if resp.StatusCode != http.StatusOK {
			return nil, fmt.Errorf("walk: %s answered %d: %s", paths[len(paths)-1], resp.StatusCode, body)
		}
		var page struct {
			Items    []json.RawMessage `json:"items"`
			PageInfo struct {
				NextCursor *string `json:"nextCursor"`
			} `json:"pageInfo"`
		}
		if err := json.Unmarshal(body, &page); err != nil {
			return nil, fmt.Errorf("walk: %s: %w", paths[len(paths)-1], err)
		}
		if len(page.Items) != 50 && page.PageInfo.NextCursor != nil {
			return nil, fmt.Errorf("walk: %s: %d items, want 50", paths[len(paths)-1], len(page.Items))
		}
		if page.PageInfo.NextCursor == nil {
			break
		}
		paths = append(paths, route+"?"+url.Values{"$skiptoken": {*page.PageInfo.NextCursor}}.Encode())
	}
	return paths, nil
}
