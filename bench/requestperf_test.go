package bench

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/riverqueue/river"
	"github.com/riverqueue/river/riverdriver/riverpgxv5"

	"github.com/registrum/registrum/host/hosttest"
	"github.com/registrum/registrum/issuer/issuertest"
	"github.com/registrum/registrum/store"
	"github.com/registrum/registrum/store/storetest"
)

// TestChangeRequestReport measures, in one run, change requests whose planner
// writes one record (draft create, submit, apply) through the record host
// against plain creates of the same records, with the tengo and with the
// WebAssembly planner, and the latency of River jobs from the commit of the
// transaction that inserts them to the start of their work. It runs only with
// REGISTRUM_REQUEST_BENCH=1 (see docs/performance.md);
// REGISTRUM_REQUEST_BENCH_ROUNDS sets how many rounds of the three HTTP
// phases run (default 2).
func TestChangeRequestReport(t *testing.T) {
	if os.Getenv("REGISTRUM_REQUEST_BENCH") != "1" {
		t.Skip("set REGISTRUM_REQUEST_BENCH=1 to run the change-request performance report")
	}
	const clients = 32
	phase := 5 * time.Second
	rounds := 2
	if v := os.Getenv("REGISTRUM_REQUEST_BENCH_ROUNDS"); v != "" {
		fmt.Sscan(v, &rounds)
	}
	rounds = min(max(rounds, 1), 5)
	ctx := context.Background()

	is, auth := hosttest.TokenIssuer(t)
	dsn := storetest.NewDatabase(t)
	cfg := hosttest.Deployment(t, requestPerfProject(t), dsn, auth)
	_, srv := hosttest.Serve(t, cfg)
	c := &benchClient{
		base:  srv.URL,
		token: "Bearer " + is.Token(t, issuertest.StandardClientID),
		http: &http.Client{Timeout: 30 * time.Second, Transport: &http.Transport{
			MaxIdleConns: 2 * clients, MaxIdleConnsPerHost: 2 * clients, IdleConnTimeout: time.Minute,
		}},
	}
	pool, err := pgxpool.New(ctx, dsn)
	if err != nil {
		t.Fatal(err)
	}
	defer pool.Close()

	type flow struct {
		name, id string
		op       func(n int64, steps *stepTimes) error
		// drafts, when set, are prepared (untimed) before each run.
		drafts *drafts
	}
	tengoDrafts := &drafts{c: c, route: "item-requests"}
	wasmDrafts := &drafts{c: c, route: "item-requests-wasm"}
	flows := []flow{
		{"plain create (POST /v1/records/items)", "create", c.createItem, nil},
		{"request, tengo planner (create + submit + apply)", "tengo", func(n int64, s *stepTimes) error { return c.request("item-requests", n, s) }, nil},
		{"request, WASM planner (create + submit + apply)", "wasm", func(n int64, s *stepTimes) error { return c.request("item-requests-wasm", n, s) }, nil},
		{"request, tengo planner (submit + apply of a prepared draft)", "tengo-prepared", func(n int64, s *stepTimes) error { return tengoDrafts.submitApply(s) }, tengoDrafts},
		{"request, WASM planner (submit + apply of a prepared draft)", "wasm-prepared", func(n int64, s *stepTimes) error { return wasmDrafts.submitApply(s) }, wasmDrafts},
	}
	var seq atomic.Int64
	var written atomic.Int64 // items the phases report written, warm-up included
	// The entity tables the host phases write (beside requestTables).
	hostTables := []string{"registrum_data.e_item", "registrum_data.e_item_request", "registrum_data.e_item_request_wasm"}
	run := func(f flow, d time.Duration, profile string) (measured, *stepTimes, time.Duration, time.Duration, error) {
		if f.drafts != nil {
			// Enough for the phase at up to 3,000 requests/s.
			if err := f.drafts.prepare(int(3000*d.Seconds()), &seq); err != nil {
				return measured{}, nil, 0, 0, err
			}
		}
		if profile != "" {
			// A measured phase starts, as each floor phase does, from
			// vacuumed tables and a checkpoint, its drafts written: it does
			// not pay for the dead rows and dirty buffers of the phases
			// before it, nor for the vacuum its drafts would set off.
			settleTables(ctx, pool, hostTables...)
		}
		// The profile covers the measured phase only, not the drafts'
		// preparation.
		if dir := os.Getenv("REGISTRUM_REQUEST_BENCH_PROFILE"); dir != "" && profile != "" {
			defer startCPUProfile(t, filepath.Join(dir, profile+".pprof"))()
		}
		if profile != "" {
			defer recordSystem(t, "host "+profile)()
		}
		var first atomic.Pointer[error]
		steps := &stepTimes{}
		cpu0, db0 := processCPU(), databaseCPU()
		m := measure(clients, d, func(w, i int) error {
			err := f.op(seq.Add(1), steps)
			if err != nil {
				first.CompareAndSwap(nil, &err)
			}
			return err
		})
		written.Add(m.ops)
		var e error
		if p := first.Load(); p != nil {
			e = *p
		}
		return m, steps, processCPU() - cpu0, databaseCPU() - db0, e
	}

	// Warm up every path (connections, the planners' pools, statement caches).
	for _, f := range flows {
		if m, _, _, _, err := run(f, time.Second, ""); m.ops == 0 || err != nil {
			t.Fatalf("warm-up of %s: %d done, %d failed: %v", f.name, m.ops, m.failures, err)
		}
	}

	var report strings.Builder
	fmt.Fprintf(&report, "\n%d concurrent clients (one Go net/http client in the test process drives every phase), %s per phase after VACUUM ANALYZE and CHECKPOINT (as every floor phase), %d rounds, load average before: %s\n",
		clients, phase, rounds, loadAverage())
	report.WriteString("| round | phase | written records/s | HTTP requests/s | p50 | p99 | failed | ratio to plain create | process CPU per record (host + client) | PostgreSQL CPU per record | mean create / submit / apply |\n|---|---|---|---|---|---|---|---|---|---|---|\n")
	failed := false
	hostRates := map[string]float64{} // written records/s by phase id, the mean of the rounds
	for r := 1; r <= rounds; r++ {
		var base float64
		for i, f := range flows {
			m, steps, cpu, db, err := run(f, phase, fmt.Sprintf("%s-%d", f.id, r))
			if err != nil {
				t.Logf("%s: first failure: %v", f.name, err)
				failed = true
			}
			if i == 0 {
				base = m.rate()
			}
			hostRates[f.id] += m.rate() / float64(rounds)
			perOp := 1
			switch {
			case f.drafts != nil:
				perOp = 2
			case i > 0:
				perOp = 3
			}
			fmt.Fprintf(&report, "| %d | %s | %.0f | %.0f | %v | %v | %d | %.2f | %.0f µs | %.0f µs | %s |\n", r, f.name, m.rate(), m.rate()*float64(perOp),
				m.p50.Round(10*time.Microsecond), m.p99.Round(10*time.Microsecond), m.failures, m.rate()/base,
				float64(cpu.Microseconds())/float64(max(m.ops, 1)), float64(db.Microseconds())/float64(max(m.ops, 1)), steps.means(m.ops))
		}
	}
	var items int64
	if err := pool.QueryRow(ctx, "SELECT count(*) FROM registrum_data.e_item").Scan(&items); err != nil {
		t.Fatal(err)
	}
	if items != written.Load() {
		t.Errorf("%d items stored, the phases report %d written", items, written.Load())
	}

	// The database floor of the same work, in the host's database: one
	// create under an idempotency key first, whose stored outcome the floor
	// creates' outcomes copy.
	h, _, err := c.post("/v1/records/items", `{"data":{"code":"floor-sample","amount":1}}`, http.StatusCreated, "Idempotency-Key", uuid.NewString())
	if err != nil {
		t.Fatal(err)
	}
	report.WriteString(requestFloorReport(ctx, t, dsn, cfg.Package, clients, phase, &seq, filepath.Base(h.Get("Location")), hostRates, c))

	// River job latency: commit → start of the job's work.
	idle := jobLatency(t, 200, 5*time.Second, nil, nil)
	busy := jobLatency(t, 200, 5*time.Second, func(d time.Duration) {
		run(flows[1], d, "")
	}, nil)
	// The same with the insert notifications River's inserting client sends
	// limited to one per 10 ms instead of its default 100 ms: a client built
	// here, inserting with InsertTx in a transaction of its own.
	fast := jobLatency(t, 200, 5*time.Second, nil, fastInserter(t))
	fmt.Fprintf(&report, "\nRiver job latency, no-op jobs inserted with store.Writer.Enqueue at 200/s for 5 s, runner from store.NewJobRunner (FetchCooldown 10 ms) on a pool of the host's size:\n")
	report.WriteString("| while | jobs | commit → start p50 | p99 | max | insert (job.CreatedAt) → start p50 | p99 |\n|---|---|---|---|---|---|---|\n")
	report.WriteString(idle.row("the host is idle"))
	report.WriteString(busy.row(fmt.Sprintf("%d clients submit and apply tengo requests", clients)))
	report.WriteString(fast.row("the host is idle; inserted by a River client with FetchCooldown 10 ms (its insert notifications at most every 10 ms), not store.Writer.Enqueue"))
	fmt.Fprintf(&report, "load average after: %s\n", loadAverage())
	t.Log(report.String())
	if failed {
		t.Errorf("some requests failed")
	}
}

// requestPerfProject copies testdata/requestperf and builds its planner to
// WebAssembly into it (plugins/planner.wasm), as an author would.
func requestPerfProject(t testing.TB) string {
	t.Helper()
	dir := t.TempDir()
	if err := os.CopyFS(dir, os.DirFS("testdata/requestperf")); err != nil {
		t.Fatal(err)
	}
	build := exec.Command("go", "build", "-buildmode=c-shared", "-trimpath", "-o", filepath.Join(dir, "plugins", "planner.wasm"), "./testdata/requestperf/planner")
	build.Env = append(os.Environ(), "GOOS=wasip1", "GOARCH=wasm")
	if out, err := build.CombinedOutput(); err != nil {
		t.Fatalf("build the WebAssembly planner: %v\n%s", err, out)
	}
	return dir
}

// benchClient is the one HTTP client of every phase of the report.
type benchClient struct {
	http        *http.Client
	base, token string
}

// stepTimes sums the time spent in each HTTP step of a phase.
type stepTimes struct{ create, submit, apply atomic.Int64 }

func (s *stepTimes) means(ops int64) string {
	if s.submit.Load() == 0 {
		return "—"
	}
	ms := func(a *atomic.Int64) string {
		return (time.Duration(a.Load()) / time.Duration(max(ops, 1))).Round(10 * time.Microsecond).String()
	}
	return ms(&s.create) + " / " + ms(&s.submit) + " / " + ms(&s.apply)
}

// post sends one POST and reads the whole answer.
func (c *benchClient) post(path, body string, want int, hdr ...string) (http.Header, []byte, error) {
	req, err := http.NewRequest("POST", c.base+path, strings.NewReader(body))
	if err != nil {
		return nil, nil, err
	}
	req.Header.Set("Authorization", c.token)
	req.Header.Set("Content-Type", "application/json")
	for i := 0; i+1 < len(hdr); i += 2 {
		req.Header.Set(hdr[i], hdr[i+1])
	}
	resp, err := c.http.Do(req)
	if err != nil {
		return nil, nil, err
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		return nil, nil, err
	}
	if resp.StatusCode != want {
		return nil, nil, fmt.Errorf("POST %s: %d %s", path, resp.StatusCode, b)
	}
	return resp.Header, b, nil
}

// createItem is the baseline: the record the planners write, created directly.
func (c *benchClient) createItem(n int64, s *stepTimes) error {
	t0 := time.Now()
	_, _, err := c.post("/v1/records/items", fmt.Sprintf(`{"data":{"code":"i-%d","amount":%d}}`, n, n), http.StatusCreated)
	s.create.Add(int64(time.Since(t0)))
	return err
}

// request creates a draft of the request entity at route, submits it and
// applies its proposal: its planner creates one item.
func (c *benchClient) request(route string, n int64, s *stepTimes) error {
	t0 := time.Now()
	loc, etag, err := c.draft(route, n)
	if err != nil {
		return err
	}
	s.create.Add(int64(time.Since(t0)))
	return c.submitApply(loc, etag, s)
}

// draft creates a draft request whose planner writes one item.
func (c *benchClient) draft(route string, n int64) (loc, etag string, err error) {
	h, _, err := c.post("/v1/records/"+route, fmt.Sprintf(`{"data":{"code":"r-%d","amount":%d}}`, n, n), http.StatusCreated)
	if err != nil {
		return "", "", err
	}
	return h.Get("Location"), h.Get("ETag"), nil
}

// submitApply submits a draft and applies its proposal.
func (c *benchClient) submitApply(loc, etag string, s *stepTimes) error {
	t1 := time.Now()
	h, b, err := c.post(loc+"/actions/submit", `{"actorReference":"bench"}`, http.StatusOK,
		"If-Match", etag, "Idempotency-Key", uuid.NewString())
	if err != nil {
		return err
	}
	var sub struct {
		Request struct {
			EffectDigest string `json:"effectDigest"`
		} `json:"request"`
	}
	if err := json.Unmarshal(b, &sub); err != nil || sub.Request.EffectDigest == "" {
		return fmt.Errorf("submit answered %s", b)
	}
	t2 := time.Now()
	s.submit.Add(int64(t2.Sub(t1)))
	_, _, err = c.post(loc+"/actions/apply", applyBody(sub.Request.EffectDigest), http.StatusOK,
		"If-Match", h.Get("ETag"), "Idempotency-Key", uuid.NewString())
	s.apply.Add(int64(time.Since(t2)))
	return err
}

// applyBody is the body of an apply of proposal version 1 with effectDigest.
func applyBody(effectDigest string) string {
	return fmt.Sprintf(`{"actorReference":"bench","proposalVersion":1,"effectDigest":%q}`, effectDigest)
}

// drafts holds drafts created before a phase, so that the phase times
// submit and apply only.
type drafts struct {
	c     *benchClient
	route string
	ready chan [2]string
}

// prepare creates n drafts with 32 clients, untimed.
func (d *drafts) prepare(n int, seq *atomic.Int64) error {
	d.ready = make(chan [2]string, n)
	var wg sync.WaitGroup
	var first atomic.Pointer[error]
	per := n / 32
	for range 32 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for range per {
				loc, etag, err := d.c.draft(d.route, seq.Add(1))
				if err != nil {
					first.CompareAndSwap(nil, &err)
					return
				}
				d.ready <- [2]string{loc, etag}
			}
		}()
	}
	wg.Wait()
	if p := first.Load(); p != nil {
		return *p
	}
	return nil
}

// submitApply submits and applies a prepared draft; it fails when the
// prepared drafts ran out (the phase must not time a create).
func (d *drafts) submitApply(s *stepTimes) error {
	select {
	case x := <-d.ready:
		return d.c.submitApply(x[0], x[1], s)
	default:
		return errors.New("the prepared drafts ran out; prepare more")
	}
}

// loadAverage is the first line of /proc/loadavg, or "unknown".
func loadAverage() string {
	b, err := os.ReadFile("/proc/loadavg")
	if err != nil {
		return "unknown"
	}
	f := strings.Fields(string(b))
	if len(f) < 3 {
		return "unknown"
	}
	return strings.Join(f[:3], " ")
}

// latencyProbeArgs is the no-op job of the latency measurement: Seq names
// the insert whose commit time the test recorded.
type latencyProbeArgs struct {
	Seq int `json:"seq"`
}

// Kind implements river.JobArgs.
func (latencyProbeArgs) Kind() string { return "registrum.test.latency_probe" }

// latencyProbeWorker records when each probe's work starts.
type latencyProbeWorker struct {
	river.WorkerDefaults[latencyProbeArgs]
	started func(seq int, at, created time.Time)
}

// Work implements river.Worker.
func (w *latencyProbeWorker) Work(_ context.Context, job *river.Job[latencyProbeArgs]) error {
	w.started(job.Args.Seq, time.Now(), job.CreatedAt)
	return nil
}

// latencies are the outcome of one job latency measurement.
type latencies struct {
	jobs                 int
	p50, p99, max        time.Duration
	insertP50, insertP99 time.Duration
	unfinished, total    int
	insertFailures       int
	early                int // started before the writer saw its commit return
}

func (l latencies) row(while string) string {
	return fmt.Sprintf("| %s | %d of %d (%d insert failures, %d not started, %d started before their write returned) | %v | %v | %v | %v | %v |\n", while, l.jobs, l.total, l.insertFailures, l.unfinished, l.early,
		l.p50.Round(10*time.Microsecond), l.p99.Round(10*time.Microsecond), l.max.Round(10*time.Microsecond),
		l.insertP50.Round(10*time.Microsecond), l.insertP99.Round(10*time.Microsecond))
}

// jobInserter inserts one job in a transaction of its own on pool.
type jobInserter func(ctx context.Context, pool *pgxpool.Pool, st *store.Store, args river.JobArgs) error

// fastInserter returns a jobInserter through an insert-only River client of
// its own whose FetchCooldown, which also spaces its insert notifications, is
// 10 ms.
func fastInserter(t *testing.T) jobInserter {
	var once sync.Once
	var client *river.Client[pgx.Tx]
	return func(ctx context.Context, pool *pgxpool.Pool, _ *store.Store, args river.JobArgs) error {
		once.Do(func() {
			var err error
			client, err = river.NewClient(riverpgxv5.New(pool), &river.Config{Schema: store.JobSchema, FetchCooldown: 10 * time.Millisecond, Logger: slog.New(slog.DiscardHandler)})
			if err != nil {
				t.Error(err)
			}
		})
		if client == nil {
			return errors.New("no River client")
		}
		return pgx.BeginFunc(ctx, pool, func(tx pgx.Tx) error {
			_, err := client.InsertTx(ctx, tx, args, nil)
			return err
		})
	}
}

// writerEnqueue inserts a job as the host does: store.Writer.Enqueue in a
// write's transaction.
func writerEnqueue(ctx context.Context, _ *pgxpool.Pool, st *store.Store, args river.JobArgs) error {
	_, _, err := st.Write(ctx, nil, func(w *store.Writer) (*store.Outcome, error) {
		return &store.Outcome{}, w.Enqueue(ctx, args, nil)
	})
	return err
}

// jobLatency inserts no-op jobs at rate per second for d, each in a write
// transaction of its own (insert, by default writerEnqueue), on a fresh
// database worked by a runner built with store.NewJobRunner's defaults as
// the host's is, on a pool sized as the host's (store.Connect: the runner
// works half its connections' worth of jobs at once), and measures from the
// commit (when the insert returns) to the start of the job's work. With
// alongside, it runs for d while the jobs are inserted.
func jobLatency(t *testing.T, rate int, d time.Duration, alongside func(time.Duration), insert jobInserter) latencies {
	t.Helper()
	ctx := context.Background()
	if insert == nil {
		insert = writerEnqueue
	}
	pool, err := store.Connect(ctx, storetest.NewDatabase(t))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(pool.Close)
	st := storetest.Open(t, pool, storetest.Package(t))
	n := rate * int(d/time.Second)
	committed := make([]time.Time, n)
	started := make([]time.Time, n)
	created := make([]time.Time, n)
	var mu sync.Mutex
	var done sync.WaitGroup
	done.Add(n)
	workers := river.NewWorkers()
	river.AddWorker(workers, &latencyProbeWorker{started: func(seq int, at, c time.Time) {
		mu.Lock()
		defer mu.Unlock()
		if seq >= 0 && seq < n && started[seq].IsZero() {
			started[seq], created[seq] = at, c
			done.Done()
		}
	}})
	runner, err := st.NewJobRunner(workers, store.JobRunnerOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if err := runner.Start(ctx); err != nil {
		t.Fatal(err)
	}
	defer func() {
		stop, cancel := context.WithTimeout(ctx, 10*time.Second)
		defer cancel()
		runner.Stop(stop)
	}()

	var side sync.WaitGroup
	if alongside != nil {
		side.Add(1)
		go func() {
			defer side.Done()
			alongside(d + time.Second)
		}()
		time.Sleep(500 * time.Millisecond) // let the load settle first
	}
	var inserts sync.WaitGroup
	var insertFailures atomic.Int64
	interval := time.Second / time.Duration(rate)
	begin := time.Now()
	for i := range n {
		time.Sleep(time.Until(begin.Add(time.Duration(i) * interval)))
		inserts.Add(1)
		go func() {
			defer inserts.Done()
			err := insert(ctx, pool, st, latencyProbeArgs{Seq: i})
			at := time.Now()
			mu.Lock()
			committed[i] = at
			mu.Unlock()
			if err != nil {
				insertFailures.Add(1)
				done.Done()
				t.Logf("insert %d: %v", i, err)
			}
		}()
	}
	inserts.Wait()
	finished := make(chan struct{})
	go func() { done.Wait(); close(finished) }()
	select {
	case <-finished:
	case <-time.After(30 * time.Second):
	}
	side.Wait()

	mu.Lock()
	defer mu.Unlock()
	l := latencies{total: n, insertFailures: int(insertFailures.Load())}
	var lat, ins []time.Duration
	for i := range n {
		if started[i].IsZero() {
			continue
		}
		if started[i].Before(committed[i]) {
			l.early++
		}
		lat = append(lat, started[i].Sub(committed[i]))
		ins = append(ins, started[i].Sub(created[i]))
	}
	l.jobs = len(lat)
	l.unfinished = n - l.jobs - l.insertFailures
	if len(lat) == 0 {
		t.Fatal("no job started")
	}
	slices.Sort(lat)
	slices.Sort(ins)
	l.p50, l.p99, l.max = lat[len(lat)/2], lat[len(lat)*99/100], lat[len(lat)-1]
	l.insertP50, l.insertP99 = ins[len(ins)/2], ins[len(ins)*99/100]
	if l.unfinished > 0 || l.insertFailures > 0 {
		t.Errorf("job latency: %d jobs never started, %d inserts failed", l.unfinished, l.insertFailures)
	}
	return l
}
