package soak

import (
	"bytes"
	"context"
	"fmt"
	mrand "math/rand/v2"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"sort"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"text/tabwriter"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/registrum/registrum/host/auth/authtest"
	"github.com/registrum/registrum/internal/binarytest"
	"github.com/registrum/registrum/issuer/issuertest"
	"github.com/registrum/registrum/sdk/tokensource"
	"github.com/registrum/registrum/sdk/webhook"
	"github.com/registrum/registrum/store/pglocal"
)

// Environment of the soak.
const (
	// EnvDuration turns the soak on and sets how long traffic runs
	// (a Go duration: 60s, 10m).
	EnvDuration = "REGISTRUM_SOAK"
	// EnvClients sets the number of concurrent clients (default 16).
	EnvClients = "REGISTRUM_SOAK_CLIENTS"
	// EnvRate sets the target rate in client steps per second across every
	// client (default 40); a step is one operation, or the few of a change
	// request or a paged read.
	EnvRate = "REGISTRUM_SOAK_RATE"
	// EnvReceiverDown overrides how long the receiver answers 503
	// (default receiverDownFor); longer than the retry schedule survives,
	// it shows what a receiver's longer outage does.
	EnvReceiverDown = "REGISTRUM_SOAK_RECEIVER_DOWN"
	// EnvPooler=pgbouncer runs the hosts and the worker behind PgBouncer
	// in transaction mode: database.url names it, database.directUrl the
	// cluster (docs/record-host.md, "Connection poolers"). Unset, the
	// processes connect to the cluster directly.
	EnvPooler = "REGISTRUM_SOAK_POOLER"
	// EnvRequirePgBouncer makes a missing pgbouncer binary a failure of
	// the pooler mode instead of a skip (CI sets it).
	EnvRequirePgBouncer = "REGISTRUM_REQUIRE_PGBOUNCER"
)

// kindReap is the periodic River job that reaps expired delivery leases
// (hooks.KindReap): it stays scheduled by design.
const kindReap = "registrum.event.reap"

// instanceID names the soak deployment in every event's source.
const instanceID = "soak"

// goneHook is the hook of testdata/registry.yaml whose destination answers
// 410 Gone.
const goneHook = "parcel-removed-gone"

// receiverDownFor is the shortest time the receiver answers 503 (a tenth
// of the run, at most two minutes): within what the hooks' retry schedule
// survives (testdata/registry.yaml authors a short one per hook, 10
// attempts 1, 2, 5, 10 then 30 s apart: about 168 s of pauses, so that the
// run drains within seconds of the outage's end), so every event captured
// before or during the window is still delivered.
const receiverDownFor = 6 * time.Second

// hostDrain is the hosts' listener.drainSeconds: after a SIGTERM a host
// keeps serving (its /ready answering 503) that long before it closes its
// listener.
const hostDrain = 2 * time.Second

// termExitWithin bounds how long a host may take to exit 0 after a
// SIGTERM: its drain delay, then at most 10 s for the requests in flight
// and 10 s for the jobs (docs/record-host.md, "Shutdown"), and 5 s of
// slack for a loaded machine.
const termExitWithin = hostDrain + 25*time.Second

// warmUp is how long the traffic (and an incarnation) runs before the
// first sample of a process's goroutines and heap.
const warmUp = 10 * time.Second

// harness runs the processes and holds what the run recorded.
type harness struct {
	t       *testing.T
	dir     string
	binary  string
	pgDir   string
	dsn     string
	hosts   []*proc
	worker  *proc
	rcv     *Receiver
	auth    *Authority
	scan    *scanner
	servers []*httptest.Server // the receiver, the 410 destination, the authority
	tokens  *tokensource.Source
	http    *http.Client
	stopped atomic.Bool
	steps   atomic.Int64
	down    time.Duration // how long the receiver answers 503
	pooler  bool          // behind PgBouncer (EnvPooler)

	clusterMu sync.Mutex
	cluster   *pglocal.Cluster

	mu      sync.Mutex
	ops     []*Op
	windows []Window
	tag     string // the history tag, as last read

	goneHits atomic.Int64 // requests the 410 destination answered

	trafficStarted chan struct{}    // closed when the traffic starts
	trafficStart   time.Time        // set before trafficStarted is closed
	trafficEnded   atomic.Int64     // when the traffic stopped (Unix ns), once it has
	terms          []string         // what each term-host fault observed, for the summary
	snapshots      []snapshotSample // first snapshot pages, read again at the end

	ingest        *balancer       // the importer's way to the hosts
	importer      importer        // how registrum ingest is run
	ingestions    []Ingestion     // the runs driven, for the checker
	ingestReports []*ingestReport // and for the summary
}

// trafficEnd returns when the traffic stopped (the zero time before).
func (h *harness) trafficEnd() time.Time {
	if n := h.trafficEnded.Load(); n != 0 {
		return time.Unix(0, n)
	}
	return time.Time{}
}

func (h *harness) record(op *Op) {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.ops = append(h.ops, op)
}

// written records what an acknowledging answer reported.
func (h *harness) written(op *Op, ws ...Written) {
	h.mu.Lock()
	defer h.mu.Unlock()
	op.Written = append(op.Written, ws...)
}

func (h *harness) stopping() bool { return h.stopped.Load() }

func (h *harness) window(w Window) {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.windows = append(h.windows, w)
	h.t.Logf("fault %-16s host %2d  %s → %s (%v)", w.Fault, w.Host, stamp(w.Start), stamp(w.End), w.End.Sub(w.Start).Round(time.Millisecond))
	h.checkTag("after " + w.Fault)
}

// checkTag reads the history tag: no fault of the soak (a crash, a clean
// database restart) may change it, since every host holds it from its
// start and refuses snapshot tokens of another tag (h.mu held).
func (h *harness) checkTag(when string) {
	tag, err := historyTag(context.Background(), h.dsn)
	if err != nil {
		h.t.Errorf("%s: %v", when, err)
		return
	}
	if h.tag != "" && tag != h.tag {
		h.t.Errorf("the history tag changed %s: %s, was %s (snapshot tokens of one host are refused by the others)", when, tag, h.tag)
	}
	h.tag = tag
}

// soakSettings reads the environment; ok is false when the soak is off.
func soakSettings(t *testing.T) (d time.Duration, clients int, rate float64, ok bool) {
	v := os.Getenv(EnvDuration)
	if v == "" {
		return 0, 0, 0, false
	}
	d, err := time.ParseDuration(v)
	if err != nil || d < 10*time.Second {
		t.Fatalf("%s=%q: want a duration of at least 10s (60s, 10m)", EnvDuration, v)
	}
	clients, rate = 16, 40
	if v := os.Getenv(EnvClients); v != "" {
		if clients, err = strconv.Atoi(v); err != nil || clients < 1 {
			t.Fatalf("%s=%q: want a positive integer", EnvClients, v)
		}
	}
	if v := os.Getenv(EnvRate); v != "" {
		if rate, err = strconv.ParseFloat(v, 64); err != nil || rate <= 0 {
			t.Fatalf("%s=%q: want a positive number", EnvRate, v)
		}
	}
	return d, clients, rate, true
}

// poolerSetting reads EnvPooler: whether the processes run behind
// PgBouncer; it skips the test when pgbouncer is missing and
// EnvRequirePgBouncer is not set.
func poolerSetting(t *testing.T) (bool, error) {
	switch v := os.Getenv(EnvPooler); v {
	case "":
		return false, nil
	case "pgbouncer":
		if _, err := pglocal.FindPgBouncer(); err != nil {
			if os.Getenv(EnvRequirePgBouncer) != "" {
				return false, fmt.Errorf("%s=pgbouncer: %w (%s is set)", EnvPooler, err, EnvRequirePgBouncer)
			}
			t.Skipf("%s=pgbouncer: %v; set %s=1 to make this a failure", EnvPooler, err, EnvRequirePgBouncer)
		}
		return true, nil
	default:
		return false, fmt.Errorf("%s=%q: want pgbouncer or nothing", EnvPooler, v)
	}
}

// TestSoak runs the soak (see the package documentation).
func TestSoak(t *testing.T) {
	duration, clients, rate, ok := soakSettings(t)
	if !ok {
		t.Skipf("set %s=60s (or 10m) to run the soak", EnvDuration)
	}
	pooler, err := poolerSetting(t)
	if err != nil {
		t.Fatal(err)
	}
	h := setUp(t, pooler)
	h.down = min(max(duration/10, receiverDownFor), 2*time.Minute)
	if v := os.Getenv(EnvReceiverDown); v != "" {
		d, err := time.ParseDuration(v)
		if err != nil {
			t.Fatalf("%s=%q: want a duration", EnvReceiverDown, v)
		}
		h.down = d
	}
	t.Logf("soak: %v of traffic, %d clients, target %.0f steps/s, receiver down for %v; logs in %s", duration, clients, rate, h.down, h.dir)

	// Traffic.
	start := time.Now()
	h.trafficStart = start
	close(h.trafficStarted)
	var wg sync.WaitGroup
	for i := range clients {
		c := &client{h: h, id: i, rng: mrand.New(mrand.NewPCG(uint64(i), uint64(start.UnixNano())))}
		wg.Go(func() {
			every := time.Duration(float64(clients) / rate * float64(time.Second))
			next := time.Now().Add(time.Duration(c.rng.Int64N(int64(every))))
			for !h.stopping() {
				if d := time.Until(next); d > 0 {
					time.Sleep(d)
				}
				next = next.Add(every)
				c.step()
				h.steps.Add(1)
			}
		})
	}
	faultsDone := make(chan struct{})
	go func() { defer close(faultsDone); h.injectFaults(start, duration) }()
	ingestDone := make(chan struct{})
	go func() { defer close(ingestDone); h.ingestAll(h.importer, start, duration) }()
	time.Sleep(duration)
	h.trafficEnded.Store(time.Now().UnixNano())
	h.stopped.Store(true)
	h.ingest.unpace()
	wg.Wait()
	<-faultsDone
	trafficEnd := time.Now()
	select {
	case <-ingestDone:
	case <-time.After(ingestFinishWithin + time.Minute):
		t.Errorf("the ingestion runs did not end within %v of the traffic", ingestFinishWithin+time.Minute)
	}
	ingested := time.Since(trafficEnd)
	for _, p := range append(slices.Clone(h.hosts), h.worker) {
		p.endSample()
	}

	// Drain: every delivery ended, every job finished and every verdict
	// decided, or the limit.
	drainStart := time.Now()
	var leftDeliveries, leftJobs, leftVerifications int
	for deadline := time.Now().Add(90*time.Second + 2*h.down); time.Now().Before(deadline); time.Sleep(500 * time.Millisecond) {
		var err error
		if leftDeliveries, leftJobs, leftVerifications, err = unsettled(context.Background(), h.dsn); err == nil && leftDeliveries == 0 && leftJobs == 0 && leftVerifications == 0 {
			break
		}
	}
	drained := time.Since(drainStart)

	// Every snapshot kept reads as it did when it was taken.
	h.mu.Lock()
	kept := len(h.snapshots)
	h.mu.Unlock()
	for _, v := range h.replaySnapshots() {
		t.Errorf("%s", v)
	}
	t.Logf("snapshots: %d first pages read again by their tokens", kept)
	time.Sleep(time.Second) // answers in flight to the receiver land

	// Goroutines and heap at the end: the partners and the clients let
	// their idle keep-alive connections go first (each holds goroutines in
	// the hosts), then the processes settle.
	h.http.CloseIdleConnections()
	for _, srv := range h.servers {
		srv.Config.SetKeepAlivesEnabled(false)
	}
	h.scan.dropIdle()
	time.Sleep(2 * time.Second)
	var footprints []Footprint
	for _, p := range append(slices.Clone(h.hosts), h.worker) {
		if err := p.endFootprint(); err != nil {
			t.Errorf("goroutines and heap at the end: %v", err)
			continue
		}
		p.mu.Lock()
		last := p.samples[len(p.samples)-1]
		p.mu.Unlock()
		if last.WarmGoroutines < 0 {
			t.Errorf("%s: no warm-up sample of its goroutines and heap (incarnation pid %d)", p.name, last.PID)
			continue
		}
		footprints = append(footprints, Footprint{Process: p.name, WarmGoroutines: last.WarmGoroutines, EndGoroutines: last.EndGoroutines,
			WarmHeap: last.WarmHeap, EndHeap: last.EndHeap})
	}

	db, err := readDB(context.Background(), h.dsn)
	if err != nil {
		t.Fatal(err)
	}
	h.mu.Lock()
	state := h.state(db)
	h.mu.Unlock()
	state.Footprints = footprints
	f := Check(state)
	h.summary(t, state, f, trafficEnd.Sub(start), rate, clients, drained, leftDeliveries, leftJobs, leftVerifications)
	t.Logf("ingestion: ended %v after the traffic", ingested.Round(100*time.Millisecond))
	for i, r := range h.ingestReports {
		if r.err != "" {
			t.Errorf("ingestion %d: the importer's last launch failed: %s", i, r.err)
		}
	}
	// A committed chunk whose answer the balancer cut is resubmitted by
	// the importer and answered with its stored receipt.
	if _, replayed := chunkAnswers(state.Ops); int64(replayed) < h.ingest.dropped.Load() {
		t.Errorf("ingestion: %d answers of committed chunks were cut, %d resubmissions answered a stored receipt", h.ingest.dropped.Load(), replayed)
	}
	for _, v := range f.Violations {
		t.Errorf("%s", v)
	}
	// Host logs: a panic is a finding even if every invariant held.
	for _, p := range append(slices.Clone(h.hosts), h.worker) {
		b, _ := os.ReadFile(p.logPath)
		if n := bytes.Count(b, []byte("panic")); n > 0 {
			t.Errorf("%s: %d lines mention a panic (log %s)", p.name, n, p.logPath)
		}
	}
	if t.Failed() {
		return
	}
	h.closingSelfCheck(t, state)
}

// setUp starts everything: PostgreSQL, the issuer, the receiver, two hosts
// and a worker.
func setUp(t *testing.T, pooler bool) *harness {
	t.Helper()
	h := &harness{t: t, pooler: pooler, http: &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: 64}}, trafficStarted: make(chan struct{})}
	var err error
	// The run's folder (configurations, process logs, summary.txt) is kept
	// when the soak fails.
	if h.dir, err = os.MkdirTemp("", "soak"); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if t.Failed() {
			t.Logf("the run's logs are kept in %s", h.dir)
			return
		}
		os.RemoveAll(h.dir)
	})
	if h.binary, err = binarytest.Build(h.dir); err != nil {
		t.Fatal(err)
	}
	// The scanner first: the package names its address.
	scannerToken := []byte("soak-scanner-token-0123456789")
	if h.scan, err = startScanner(scannerToken); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { h.scan.setDown(true) })
	project := filepath.Join(h.dir, "project")
	if err := os.CopyFS(project, os.DirFS("testdata")); err != nil {
		t.Fatal(err)
	}
	registry := filepath.Join(project, "registry.yaml")
	yaml, err := os.ReadFile(registry)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(registry, bytes.ReplaceAll(yaml, []byte("VERIFIER_ENDPOINT"), []byte(h.scan.URL())), 0o644); err != nil {
		t.Fatal(err)
	}
	binarytest.AddExamplePlanner(t, project)
	pkg := filepath.Join(h.dir, "package")
	if out, err := exec.Command(h.binary, "compile", project, "--out", pkg).CombinedOutput(); err != nil {
		t.Fatalf("compile: %v\n%s", err, out)
	}

	// A persistent cluster (so that it can be stopped and started again on
	// the same socket), in a folder its unprivileged user can reach.
	if h.pgDir, err = os.MkdirTemp("", "soakpg"); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if t.Failed() {
			t.Logf("the cluster's folder is kept in %s", h.pgDir)
			return
		}
		os.RemoveAll(h.pgDir)
	})
	if err := h.startPostgres(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		h.clusterMu.Lock()
		defer h.clusterMu.Unlock()
		h.cluster.Stop()
	})
	h.tune(t)
	if err := h.cluster.EnsureDatabase(context.Background(), "soak"); err != nil {
		t.Fatal(err)
	}
	h.dsn = h.cluster.DSN("soak")
	database := fmt.Sprintf("{url: %q}", h.dsn)
	if h.pooler {
		b, err := pglocal.StartPgBouncer(context.Background(), h.dsn)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() {
			if t.Failed() {
				os.WriteFile(filepath.Join(h.dir, "pgbouncer.log"), []byte(b.Log()), 0o600)
			}
			b.Stop()
		})
		database = fmt.Sprintf("{url: %q, directUrl: %q}", b.DSN("soak"), h.dsn)
		t.Logf("soak: the processes connect through PgBouncer (transaction mode) at %s", b.DSN("soak"))
	}

	is := authtest.StartIssuer(t, issuertest.DevOptions{Scopes: []string{"land:write"}}, nil)
	h.tokens = is.Source(t, issuertest.StandardClientID, nil)

	key := bytes.Repeat([]byte("w"), 32)
	h.rcv = &Receiver{Verifier: webhook.Verifier{Key: key, Path: "/hooks/registry", Source: "urn:engine:registry:soak:instance:" + instanceID}}
	srv := httptest.NewServer(h.rcv)
	t.Cleanup(srv.Close)
	h.servers = append(h.servers, srv)

	// The 410 destination: a partner gone for good.
	gone := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		h.goneHits.Add(1)
		w.WriteHeader(http.StatusGone)
	}))
	t.Cleanup(gone.Close)
	h.servers = append(h.servers, gone)

	// The importer's balancer in front of the two hosts.
	h.ingest = &balancer{h: h}
	ingestSrv := httptest.NewServer(h.ingest)
	t.Cleanup(ingestSrv.Close)
	h.servers = append(h.servers, ingestSrv)

	h.auth = NewAuthority()
	authority := httptest.NewServer(h.auth)
	t.Cleanup(authority.Close)
	h.servers = append(h.servers, authority)

	secrets := filepath.Join(h.dir, "secrets")
	os.MkdirAll(secrets, 0o700)
	os.WriteFile(filepath.Join(secrets, "host-key"), bytes.Repeat([]byte{7}, 32), 0o600)
	os.WriteFile(filepath.Join(secrets, "webhook-key"), key, 0o600)
	os.WriteFile(filepath.Join(secrets, "scanner-token"), append(scannerToken, '\n'), 0o600)
	for _, c := range is.Setup.Clients {
		if c.ID == issuertest.StandardClientID {
			jwk, err := os.ReadFile(c.KeyFile)
			if err != nil {
				t.Fatal(err)
			}
			os.WriteFile(filepath.Join(secrets, "client.jwk"), jwk, 0o600)
		}
	}
	h.importer = importer{binary: h.binary, url: ingestSrv.URL, keyFile: filepath.Join(secrets, "client.jwk"), tokenURL: is.Setup.TokenURL}
	// The host's own client of the issuer, with the review authority and as
	// the executor: the demo client's key.
	client := fmt.Sprintf("{tokenUrl: %q, clientId: %s, keyRef: secret:file/client.jwk}", is.Setup.TokenURL, issuertest.StandardClientID)
	common := fmt.Sprintf("version: 1\ndatabase: %s\npackage: %s\nsecrets: {root: secrets}\nhostKeyRef: secret:file/host-key\n%s"+
		"instanceId: %s\neventDestinations:\n  receiver: {url: %q, hmacSha256KeyRef: secret:file/webhook-key, classificationCeiling: internal, network: loopback}\n"+
		"  gone: {url: %q, hmacSha256KeyRef: secret:file/webhook-key, classificationCeiling: internal, network: loopback}\n"+
		"reviewAuthorities:\n  casework: {endpoint: %q, profile: soak, producerId: soak, pollSeconds: 1, client: %s}\n"+
		"executors:\n  clerk-bot: {accessProfile: clerk, client: %s}\n"+
		// A job a killed process had fetched is worked again after
		// rescueAfterSeconds (default 120): short, so the run drains.
		"jobs: {timeoutSeconds: 10, rescueAfterSeconds: 12}\n",
		database, pkg, is.HostAuthentication(), instanceID, srv.URL+"/hooks/registry", gone.URL+"/hooks/gone", authority.URL, client, client)
	// Each process serves its metrics (its goroutines and heap are sampled
	// there); a host drains for hostDrain after a SIGTERM.
	configFile := func(name string, port, metrics int) string {
		path := filepath.Join(h.dir, name+".yaml")
		if err := os.WriteFile(path, []byte(fmt.Sprintf("listener: {address: 127.0.0.1, port: %d, drainSeconds: %d}\nmetrics: {address: 127.0.0.1, port: %d}\n%s",
			port, int(hostDrain/time.Second), metrics, common)), 0o600); err != nil {
			t.Fatal(err)
		}
		return path
	}
	warmAt := func(ready time.Time) time.Time {
		return maxTime(ready.Add(warmUp/2), h.trafficStart.Add(warmUp))
	}
	workerMetrics := freePort(t)
	workerCfg := configFile("worker", freePort(t), workerMetrics)
	if out, err := exec.Command(h.binary, "migrate", "--config", workerCfg).CombinedOutput(); err != nil {
		t.Fatalf("migrate: %v\n%s", err, out)
	}
	for i := range 2 {
		port, metrics := freePort(t), freePort(t)
		name := fmt.Sprintf("host%d", i)
		h.hosts = append(h.hosts, &proc{name: name, binary: h.binary, args: []string{"serve", "--config", configFile(name, port, metrics)},
			base: fmt.Sprintf("http://127.0.0.1:%d", port), metrics: fmt.Sprintf("http://127.0.0.1:%d", metrics), logPath: filepath.Join(h.dir, name+".log"),
			warmStart: h.trafficStarted, warmAt: warmAt})
	}
	h.worker = &proc{name: "worker", binary: h.binary, args: []string{"worker", "--config", workerCfg}, logPath: filepath.Join(h.dir, "worker.log"),
		metrics: fmt.Sprintf("http://127.0.0.1:%d", workerMetrics), warmStart: h.trafficStarted, warmAt: warmAt}
	for _, p := range append(slices.Clone(h.hosts), h.worker) {
		if err := p.start(t, 60*time.Second); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(p.kill9)
	}
	h.mu.Lock()
	h.checkTag("at start")
	h.mu.Unlock()
	return h
}

// startPostgres starts (or starts again) the cluster in pgDir.
func (h *harness) startPostgres() error {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	c, err := pglocal.Start(ctx, pglocal.Options{Dir: h.pgDir})
	if err != nil {
		return fmt.Errorf("soak: start postgres: %w", err)
	}
	h.clusterMu.Lock()
	h.cluster = c
	h.clusterMu.Unlock()
	return nil
}

// tune turns durability off, as a throwaway test cluster does: the soak
// restarts PostgreSQL only cleanly (a fast shutdown writes everything out).
func (h *harness) tune(t *testing.T) {
	t.Helper()
	ctx := context.Background()
	conn, err := pgx.Connect(ctx, h.cluster.DSN("postgres"))
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(ctx)
	for _, q := range []string{"ALTER SYSTEM SET fsync = off", "ALTER SYSTEM SET synchronous_commit = off",
		"ALTER SYSTEM SET full_page_writes = off", "SELECT pg_reload_conf()"} {
		if _, err := conn.Exec(ctx, q); err != nil {
			t.Fatalf("%s: %v", q, err)
		}
	}
}

// maxTime returns the later of a and b.
func maxTime(a, b time.Time) time.Time {
	if a.After(b) {
		return a
	}
	return b
}

// faultCycles is how many cycles of faults (and ingestion runs) a run of
// d holds: one per five minutes, at least one.
func faultCycles(d time.Duration) int { return max(1, int(d/(5*time.Minute))) }

// injectFaults runs the fault schedule: cycles of eight faults spread over
// the run (one cycle per five minutes, at least one), each waiting for its
// recovery before the next.
func (h *harness) injectFaults(start time.Time, d time.Duration) {
	cycles := faultCycles(d)
	faults := []func(){
		func() { h.killHost(1) },
		func() { h.receiverDown() },
		func() { h.termHost(0) },
		func() { h.killWorker() },
		func() { h.verifierDown() },
		func() { h.restartPostgres() },
		func() { h.killHost(0) },
		func() { h.authorityDown() },
	}
	n := cycles * len(faults)
	for i := range n {
		at := start.Add(d * time.Duration(i+1) / time.Duration(n+1))
		time.Sleep(time.Until(at))
		if h.stopping() {
			return
		}
		faults[i%len(faults)]()
	}
}

func (h *harness) killHost(i int) {
	p := h.hosts[i]
	w := Window{Fault: "kill-host", Host: i, Start: time.Now()}
	p.kill9()
	time.Sleep(time.Second)
	if err := p.start(h.t, 60*time.Second); err != nil {
		h.t.Errorf("restart %s: %v", p.name, err)
	}
	w.End = time.Now()
	h.window(w)
}

// termHost stops host i with SIGTERM mid-traffic: its /ready must answer
// 503 before it exits, it must exit 0 within termExitWithin, and every
// request sent to it before the SIGTERM (and early in its drain) must be
// answered (drain-answers-in-flight); then it starts again on its port.
func (h *harness) termHost(i int) {
	p := h.hosts[i]
	w := Window{Fault: "term-host", Host: i, Drain: hostDrain, Start: time.Now()}
	if err := p.term(); err != nil {
		h.t.Errorf("%v", err)
		return
	}
	var notReady time.Duration
	saw503 := false
	for p.alive() && time.Since(w.Start) < termExitWithin {
		if s := p.readyStatus(); s == http.StatusServiceUnavailable {
			saw503, notReady = true, time.Since(w.Start)
			break
		}
		time.Sleep(20 * time.Millisecond)
	}
	code, err := p.waitExit(termExitWithin - time.Since(w.Start))
	exited := time.Since(w.Start)
	switch {
	case err != nil:
		h.t.Errorf("term-host: %v", err)
		p.kill9()
	case code != 0:
		h.t.Errorf("term-host: %s exited %d after SIGTERM, want 0 (log %s)", p.name, code, p.logPath)
	}
	if !saw503 {
		h.t.Errorf("term-host: %s exited without /ready answering 503 first", p.name)
	}
	h.mu.Lock()
	h.terms = append(h.terms, fmt.Sprintf("%s: /ready 503 after %v, exit %d after %v", p.name, notReady.Round(time.Millisecond), code, exited.Round(time.Millisecond)))
	h.mu.Unlock()
	if err := p.start(h.t, 60*time.Second); err != nil {
		h.t.Errorf("restart %s: %v", p.name, err)
	}
	w.End = time.Now()
	h.window(w)
}

// verifierDown makes the scanner unreachable (connections refused) for as
// long as the receiver's outage.
func (h *harness) verifierDown() {
	w := Window{Fault: "verifier-down", Host: NoHost, Start: time.Now()}
	if err := h.scan.setDown(true); err != nil {
		h.t.Errorf("verifier-down: %v", err)
	}
	time.Sleep(h.down)
	if err := h.scan.setDown(false); err != nil {
		h.t.Errorf("verifier-down: %v", err)
	}
	w.End = time.Now()
	h.window(w)
}

func (h *harness) killWorker() {
	w := Window{Fault: "kill-worker", Host: NoHost, Start: time.Now()}
	h.worker.kill9()
	time.Sleep(time.Second)
	if err := h.worker.start(h.t, 60*time.Second); err != nil {
		h.t.Errorf("restart worker: %v", err)
	}
	w.End = time.Now()
	h.window(w)
}

func (h *harness) receiverDown() {
	w := Window{Fault: "receiver-503", Host: NoHost, Start: time.Now()}
	h.rcv.SetDown(true)
	time.Sleep(h.down)
	h.rcv.SetDown(false)
	w.End = time.Now()
	h.window(w)
}

func (h *harness) authorityDown() {
	w := Window{Fault: "authority-503", Host: NoHost, Start: time.Now()}
	h.auth.SetDown(true)
	time.Sleep(h.down)
	h.auth.SetDown(false)
	w.End = time.Now()
	h.window(w)
}

// restartPostgres stops the cluster (fast shutdown) and starts it again on
// the same socket; the window ends when both hosts answer /ready again.
func (h *harness) restartPostgres() {
	w := Window{Fault: "postgres-restart", Host: AllHosts, Start: time.Now()}
	h.clusterMu.Lock()
	err := h.cluster.Stop()
	h.clusterMu.Unlock()
	if err != nil {
		h.t.Errorf("stop postgres: %v", err)
	}
	// While the database is down, /ready says so.
	time.Sleep(500 * time.Millisecond)
	for _, p := range h.hosts {
		if s := p.readyStatus(); s != http.StatusServiceUnavailable {
			h.t.Errorf("%s: /ready answered %d while PostgreSQL was stopped, want 503", p.name, s)
		}
	}
	if err := h.startPostgres(); err != nil {
		h.t.Errorf("restart postgres: %v", err)
		return
	}
	for deadline := time.Now().Add(60 * time.Second); time.Now().Before(deadline); time.Sleep(100 * time.Millisecond) {
		if h.hosts[0].ready() && h.hosts[1].ready() {
			break
		}
	}
	w.End = time.Now()
	h.window(w)
	for _, p := range append(slices.Clone(h.hosts), h.worker) {
		if !p.alive() {
			h.t.Errorf("%s exited when PostgreSQL restarted (log %s)", p.name, p.logPath)
		}
	}
}

// state assembles what the checker decides on (h.mu held).
func (h *harness) state(db DB) *State {
	return &State{
		Ops: h.ops, DB: db, Received: h.rcv.Received(), Windows: h.windows,
		Grace:             5 * time.Second,
		ExpectedEvents:    expectedEvents,
		WriteOperations:   []string{"create", "patch", "tombstone", "submit_request", "revise_request", "cancel_request", "apply_request", "attachment_upload"},
		PeriodicJobs:      []string{kindReap},
		AutomaticRequests: []string{"boundary_change"},
		GoneHooks:         []string{goneHook},
		Ingestions:        h.ingestions,
	}
}

// expectedEvents are the url hooks of testdata/registry.yaml a parcel's
// revision fires.
func expectedEvents(prev, r *Revision) []string {
	if r.Entity != "parcel" {
		return nil
	}
	switch {
	case prev == nil:
		return []string{"parcel-created-v1"}
	case r.Lifecycle == "tombstoned":
		return []string{"parcel-removed-v1"}
	case fmt.Sprint(prev.Data["area"]) != fmt.Sprint(r.Data["area"]):
		return []string{"parcel-area-changed-v1"}
	}
	return nil
}

// closingSelfCheck breaks the database the run left behind (one
// acknowledged revision deleted, the audit rows of another write deleted)
// and checks that the checker reports both.
func (h *harness) closingSelfCheck(t *testing.T, state *State) {
	var rev Written
	var trace string
	for _, o := range state.Ops {
		if o.Acked() && o.Kind == "patch" && len(o.Written) == 1 {
			if rev.Record == "" {
				rev = o.Written[0]
			} else if o.Written[0].Record != rev.Record {
				trace = o.TraceID
				break
			}
		}
	}
	if rev.Record == "" || trace == "" {
		t.Errorf("closing self-check: the run acknowledged too few patches to break")
		return
	}
	if err := breakAcknowledged(context.Background(), h.dsn, rev, trace); err != nil {
		t.Fatal(err)
	}
	db, err := readDB(context.Background(), h.dsn)
	if err != nil {
		t.Fatal(err)
	}
	state.DB = db
	got := map[string]bool{}
	for _, v := range Check(state).Violations {
		got[v.Invariant] = true
	}
	if !got[InvAckedPresent] || !got[InvAuditPresent] {
		t.Errorf("closing self-check: a deleted revision and a deleted audit row were reported as %v", got)
	} else {
		t.Logf("closing self-check: the checker reported the deleted revision and audit row")
	}
}

// summary prints the run's table.
func (h *harness) summary(t *testing.T, s *State, f Findings, ran time.Duration, target float64, clients int, drained time.Duration, leftDeliveries, leftJobs, leftVerifications int) {
	type kindStats struct {
		ops, ok, retried, failed int
		lat                      []time.Duration
		status                   map[int]int
	}
	kinds := map[string]*kindStats{}
	var total int
	for _, o := range s.Ops {
		k := kinds[o.Kind]
		if k == nil {
			k = &kindStats{status: map[int]int{}}
			kinds[o.Kind] = k
		}
		k.ops++
		total++
		if len(o.Attempts) > 1 {
			k.retried++
		}
		if l := o.last(); l.Status >= 200 && l.Status < 300 {
			k.ok++
		} else {
			k.failed++
		}
		for _, a := range o.Attempts {
			k.status[a.Status]++
			if a.Status != 0 {
				k.lat = append(k.lat, a.Latency)
			}
		}
	}
	var b strings.Builder
	tw := tabwriter.NewWriter(&b, 2, 4, 2, ' ', 0)
	fmt.Fprintf(tw, "kind\tops\t2xx\tnot 2xx\tretried\tp50\tp99\tanswers\n")
	names := make([]string, 0, len(kinds))
	for n := range kinds {
		names = append(names, n)
	}
	sort.Strings(names)
	for _, n := range names {
		k := kinds[n]
		sort.Slice(k.lat, func(i, j int) bool { return k.lat[i] < k.lat[j] })
		fmt.Fprintf(tw, "%s\t%d\t%d\t%d\t%d\t%v\t%v\t%s\n", n, k.ops, k.ok, k.failed, k.retried, pct(k.lat, 50), pct(k.lat, 99), statuses(k.status))
	}
	tw.Flush()
	steps := h.steps.Load()
	fmt.Fprintf(&b, "\nrate: %d client steps in %v = %.1f steps/s from %d clients (target %.0f); %d HTTP operations = %.1f ops/s\n",
		steps, ran.Round(time.Second), float64(steps)/ran.Seconds(), clients, target, total, float64(total)/ran.Seconds())
	fmt.Fprintf(&b, "faults:\n")
	for _, w := range s.Windows {
		fmt.Fprintf(&b, "  %-16s host %2d  %v\n", w.Fault, w.Host, w.End.Sub(w.Start).Round(time.Millisecond))
	}
	posts, accepted := h.auth.Counts()
	fmt.Fprintf(&b, "reviews: %d submissions sent to the authority, %d accepted once each\n", posts, accepted)
	acked := h.rcv.Acknowledged()
	fmt.Fprintf(&b, "events: %d captured, %d acknowledged by the receiver (%d requests, %d rejected signatures), %d redelivered inside crash windows\n",
		len(s.DB.Deliveries), acked, len(s.Received), h.rcv.Rejected(), f.Redelivered)
	var goneDead int
	for _, d := range s.DB.Deliveries {
		if d.Hook == goneHook && d.State == "dead_lettered" {
			goneDead++
		}
	}
	fmt.Fprintf(&b, "410 destination: %d requests answered 410, %d deliveries dead-lettered\n", h.goneHits.Load(), goneDead)
	verdicts := map[string]int{}
	var retriedVerifications int
	for _, v := range s.DB.Verifications {
		verdicts[v.Verdict]++
		if v.Attempts > 1 {
			retriedVerifications++
		}
	}
	var uploads int
	for _, o := range s.Ops {
		if o.Upload != nil && o.Acked() {
			uploads++
		}
	}
	fmt.Fprintf(&b, "attachments: %d uploads acknowledged; verifications %d approved, %d rejected, %d pending, %d of them after more than one attempt; the scanner decided %d times\n",
		uploads, verdicts["approved"], verdicts["rejected"], verdicts["pending"], retriedVerifications, h.scan.calls.Load())
	for i, r := range h.ingestReports {
		in := s.Ingestions[i]
		status := "ended"
		if r.err != "" {
			status = "FAILED: " + r.err
		}
		fmt.Fprintf(&b, "ingestion %d: run %s, %d rows, %d importer launches (killed once: %v), %v, %s\n",
			i, in.RunID, r.rows, r.launches, r.killed, r.took.Round(100*time.Millisecond), status)
	}
	answered, replayed := chunkAnswers(s.Ops)
	fmt.Fprintf(&b, "ingestion chunks: %d answered 2xx through the balancer, %d of them stored receipts replayed; %d answers of committed chunks cut by the balancer\n",
		answered, replayed, h.ingest.dropped.Load())
	for _, line := range h.terms {
		fmt.Fprintf(&b, "term-host: %s\n", line)
	}
	fmt.Fprintf(&b, "drain: %v (left: %d deliveries, %d jobs, %d pending verifications)\n", drained.Round(100*time.Millisecond), leftDeliveries, leftJobs, leftVerifications)
	fmt.Fprintf(&b, "writes: %d acknowledged by a replay of their key after a lost answer; %d unanswered in the end but landed whole\n", f.Replayed, f.LandedUnanswered)
	fmt.Fprintf(&b, "processes (open fds, VmRSS kB, threads: at start → at end of each incarnation):\n")
	for _, p := range append(slices.Clone(h.hosts), h.worker) {
		var parts []string
		for _, sm := range p.samples {
			parts = append(parts, fmt.Sprintf("fd %d→%d rss %d→%d thr %d→%d", sm.FDStart, sm.FDEnd, sm.RSSKBStart, sm.RSSKBEnd, sm.ThreadsStart, sm.ThreadsEnd))
		}
		fmt.Fprintf(&b, "  %-7s %s\n", p.name, strings.Join(parts, "; "))
	}
	fmt.Fprintf(&b, "goroutines and heap in use (after warm-up → at the end, last incarnation):\n")
	for _, fp := range s.Footprints {
		fmt.Fprintf(&b, "  %-7s goroutines %d→%d heap %.1f→%.1f MiB\n", fp.Process, fp.WarmGoroutines, fp.EndGoroutines, float64(fp.WarmHeap)/(1<<20), float64(fp.EndHeap)/(1<<20))
	}
	invs := make([]string, 0, len(f.Checked))
	for k := range f.Checked {
		invs = append(invs, k)
	}
	sort.Strings(invs)
	broken := map[string]int{}
	for _, v := range f.Violations {
		broken[v.Invariant]++
	}
	fmt.Fprintf(&b, "invariants:\n")
	for _, k := range invs {
		verdict := "held"
		if n := broken[k]; n > 0 {
			verdict = fmt.Sprintf("BROKEN %d times", n)
		}
		fmt.Fprintf(&b, "  %-38s %6d checked  %s\n", k, f.Checked[k], verdict)
	}
	t.Logf("soak summary\n%s", b.String())
	os.WriteFile(filepath.Join(h.dir, "summary.txt"), []byte(b.String()), 0o644)
}

// pct returns the p-th percentile of sorted durations.
func pct(sorted []time.Duration, p int) time.Duration {
	if len(sorted) == 0 {
		return 0
	}
	i := min(len(sorted)-1, len(sorted)*p/100)
	return sorted[i].Round(100 * time.Microsecond)
}

// statuses formats a status count map: "200:12 503:1 none:2".
func statuses(m map[int]int) string {
	keys := make([]int, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Ints(keys)
	var parts []string
	for _, k := range keys {
		name := strconv.Itoa(k)
		if k == 0 {
			name = "none"
		}
		parts = append(parts, fmt.Sprintf("%s:%d", name, m[k]))
	}
	return strings.Join(parts, " ")
}
