package host_test

import (
	"bytes"
	"context"
	"encoding/json"
	"log/slog"
	"net"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/registrum/registrum/host"
	"github.com/registrum/registrum/host/auth/authtest"
	"github.com/registrum/registrum/host/config"
	"github.com/registrum/registrum/issuer/issuertest"
	"github.com/registrum/registrum/store"
	"github.com/registrum/registrum/store/pglocal"
)

// outageCluster is a private PostgreSQL cluster of its own that a test
// stops, kills and starts again on the same socket while hosts use it
// (the shared cluster of storetest must stay up for the other tests).
type outageCluster struct {
	dir string
	c   *pglocal.Cluster
}

func startOutageCluster(t *testing.T) *outageCluster {
	t.Helper()
	// Not t.TempDir(): the cluster's unprivileged user must reach it (see
	// storetest); the folder's path stays short for the socket.
	root, err := os.MkdirTemp("", "rgo")
	if err != nil {
		t.Fatal(err)
	}
	if err := os.Chmod(root, 0o755); err != nil {
		t.Fatal(err)
	}
	oc := &outageCluster{dir: filepath.Join(root, "cluster")}
	t.Cleanup(func() {
		if oc.c != nil {
			oc.c.Stop()
		}
		os.RemoveAll(root)
	})
	oc.start(t)
	return oc
}

// start starts the cluster on its folder; after a kill -9 the old
// server's backends may hold its shared memory for a moment, so a refused
// start is tried again.
func (oc *outageCluster) start(t *testing.T) {
	t.Helper()
	deadline := time.Now().Add(60 * time.Second)
	for {
		c, err := pglocal.Start(context.Background(), pglocal.Options{Dir: oc.dir})
		if err == nil {
			oc.c = c
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("restart the cluster: %v", err)
		}
		time.Sleep(200 * time.Millisecond)
	}
}

// stop shuts the server down (PostgreSQL's fast shutdown: sessions are
// terminated, then the server exits).
func (oc *outageCluster) stop(t *testing.T) {
	t.Helper()
	if err := oc.c.Stop(); err != nil {
		t.Fatal(err)
	}
}

// kill9 kills the postmaster with SIGKILL, as the OOM killer would.
func (oc *outageCluster) kill9(t *testing.T) {
	t.Helper()
	if err := syscall.Kill(oc.c.PID(), syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	<-oc.c.Done()
	oc.c.Stop() // closes the log; the folder stays
}

// database creates a migrated database and returns its connection string,
// which stays valid across restarts (the socket keeps its path).
func (oc *outageCluster) database(t *testing.T, name string) string {
	t.Helper()
	ctx := context.Background()
	if err := oc.c.EnsureDatabase(ctx, name); err != nil {
		t.Fatal(err)
	}
	dsn := oc.c.DSN(name)
	pool, err := store.Connect(ctx, dsn)
	if err != nil {
		t.Fatal(err)
	}
	defer pool.Close()
	if _, err := store.Migrate(ctx, pool); err != nil {
		t.Fatal(err)
	}
	return dsn
}

// syncLog is a log sink safe for concurrent writes and reads.
type syncLog struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncLog) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncLog) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

// serveProcessLike serves cfg as `registrum serve` does (host.Serve: the
// HTTP edge, the job workers and the activation watch) on a loopback
// listener until t ends, with no drain delay, and returns a caller for it.
// Serve must not return before the test cancels it.
func serveProcessLike(t *testing.T, cfg *config.Config, token string, log *syncLog) caller {
	t.Helper()
	zero := 0
	cfg.Listener.DrainSeconds = &zero
	h, err := host.Open(context.Background(), cfg, slog.New(slog.NewJSONHandler(log, nil)))
	if err != nil {
		t.Fatal(err)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- h.Serve(ctx, ln, nil) }()
	t.Cleanup(func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("serve: %v", err)
		}
		h.Close()
	})
	go func() {
		select {
		case err := <-done:
			done <- err
			if ctx.Err() == nil {
				t.Errorf("the host stopped while the test ran: %v", err)
			}
		case <-ctx.Done():
		}
	}()
	// caller wants an httptest.Server for its URL only.
	return caller{srv: &httptest.Server{URL: "http://" + ln.Addr().String()}, token: token}
}

// probe is one route that needs the database.
type probe struct {
	what, method, path, ctype, body string
	hdr                             []string
}

// wantUnavailable calls every probe and fails unless each answers 503
// source.unavailable with Retry-After (never 500).
func wantUnavailable(t *testing.T, c caller, probes []probe) {
	t.Helper()
	for _, p := range probes {
		resp, b := c.do(t, p.method, p.path, p.ctype, p.body, p.hdr...)
		var doc struct {
			Code   string `json:"code"`
			Status int    `json:"status"`
		}
		json.Unmarshal(b, &doc)
		if resp.StatusCode != 503 || doc.Code != "source.unavailable" || doc.Status != 503 || resp.Header.Get("Retry-After") == "" {
			t.Errorf("%s with the database down: %d (Retry-After %q) %s", p.what, resp.StatusCode, resp.Header.Get("Retry-After"), b)
		}
	}
}

func wantReady(t *testing.T, c caller, status int, within time.Duration) {
	t.Helper()
	deadline := time.Now().Add(within)
	for {
		resp, _ := c.do(t, "GET", "/ready", "", "")
		if resp.StatusCode == status {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("/ready answers %d, want %d within %v", resp.StatusCode, status, within)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// TestTheDatabaseGoesAwayAndComesBack serves three hosts (change requests
// with attachments, the spatial adapter, events) on a private cluster,
// stops the cluster (fast shutdown) and later kills its postmaster: while
// it is down every route that needs the database answers 503
// source.unavailable, never 500, and /ready answers 503; once it is back
// on the same socket, writes and request actions succeed, and an event
// captured after the return is delivered by the workers that lived
// through the outage, without restarting any host.
func TestTheDatabaseGoesAwayAndComesBack(t *testing.T) {
	oc := startOutageCluster(t)
	is := authtest.StartIssuer(t, issuertest.DevOptions{Scopes: []string{"families:write"}}, nil)
	token := is.Token(t, issuertest.StandardClientID)
	var log syncLog
	defer func() {
		if t.Failed() {
			t.Logf("host log:\n%s", log.String())
		}
	}()

	// Change requests with attachments (the scanner is never called).
	dir := t.TempDir()
	if err := os.CopyFS(dir, os.DirFS("testdata/attachments")); err != nil {
		t.Fatal(err)
	}
	yaml, _ := os.ReadFile(filepath.Join(dir, "registry.yaml"))
	os.WriteFile(filepath.Join(dir, "registry.yaml"), bytes.ReplaceAll(yaml, []byte("VERIFIER_ENDPOINT"), []byte("http://127.0.0.1:9/scan")), 0o644)
	claimsCfg := deployment(t, dir, oc.database(t, "claims"), is.HostAuthentication())
	os.WriteFile(filepath.Join(claimsCfg.Secrets.Root, "scanner-token"), []byte("scanner-secret-token-0123456789\n"), 0o600)
	claims := serveProcessLike(t, claimsCfg, token, &log)
	// The spatial adapter, read anonymously.
	sites := serveProcessLike(t, deployment(t, "testdata/gis", oc.database(t, "sites"), is.HostAuthentication()), "", &log)
	// Events, delivered by the host's own workers.
	rcv := newReceiver(t)
	parcels := serveProcessLike(t, eventsDeployment(t, oc.database(t, "parcels"), rcv.srv.URL+"/hooks/registry"), "", &log)

	loc, etag := claims.create(t, "claims", `{"text":"before the outage"}`)
	resp, b := claims.upload(t, loc, "evidence", "text/plain", etag, "up-1", []byte("evidence"))
	if resp.StatusCode != 200 {
		t.Fatalf("upload: %d %s", resp.StatusCode, b)
	}
	etag = resp.Header.Get("ETag")
	var doc envelope
	json.Unmarshal(b, &doc)
	submit := doc.Data.Request.action("submit_request")
	if submit == nil {
		t.Fatalf("no submit action offered: %s", b)
	}
	parcels.create(t, "parcels", `{"parcelCode":"P-0","area":1}`)
	rcv.wait(t, 1, 30*time.Second)

	claimProbes := []probe{
		{what: "read", method: "GET", path: loc},
		{what: "list", method: "GET", path: "/v1/records/claims"},
		{what: "create", method: "POST", path: "/v1/records/claims", ctype: "application/json", body: `{"data":{"text":"during"}}`},
		{what: "patch", method: "PATCH", path: loc, ctype: "application/json-patch+json", body: `[{"op":"replace","path":"/data/text","value":"during"}]`, hdr: []string{"If-Match", etag}},
		{what: "attachment upload", method: "PATCH", path: loc + "/attachments/evidence", ctype: "text/plain", body: "other evidence", hdr: []string{"If-Match", etag, "Idempotency-Key", "up-2"}},
		{what: "attachment download", method: "GET", path: loc + "/attachments/evidence?proposalVersion=1"},
		{what: "request action", method: "POST", path: submit.Href, ctype: "application/json", body: `{"actorReference":"me"}`, hdr: []string{"If-Match", etag, "Idempotency-Key", "submit-1"}},
	}
	siteProbes := []probe{{what: "GIS items", method: "GET", path: "/v1/gis/collections/sites/items?accessProfile=public"}}
	parcelProbes := []probe{
		{what: "create with an event", method: "POST", path: "/v1/records/parcels", ctype: "application/json", body: `{"data":{"parcelCode":"P-X"}}`},
		{what: "list", method: "GET", path: "/v1/records/parcels"},
	}
	hosts := []caller{claims, sites, parcels}

	outage := func(down func(t *testing.T)) {
		down(t)
		for _, h := range hosts {
			wantReady(t, h, 503, 10*time.Second)
		}
		wantUnavailable(t, claims, claimProbes)
		wantUnavailable(t, sites, siteProbes)
		wantUnavailable(t, parcels, parcelProbes)
		// Long enough for the workers' fetches, leader election and
		// listener to fail and retry.
		time.Sleep(3 * time.Second)
		wantUnavailable(t, parcels, parcelProbes[:1])
		oc.start(t)
		for _, h := range hosts {
			wantReady(t, h, 200, 30*time.Second)
		}
		if t.Failed() {
			t.FailNow()
		}
	}

	// 1. Fast shutdown, then the same cluster again.
	outage(oc.stop)
	if resp, b := claims.do(t, "PATCH", loc, "application/json-patch+json", `[{"op":"replace","path":"/data/text","value":"after"}]`, "If-Match", etag); resp.StatusCode != 200 {
		t.Fatalf("patch after the return: %d %s", resp.StatusCode, b)
	} else {
		etag = resp.Header.Get("ETag")
	}
	if code, b := claims.act(t, submit.Href, etag, "submit-1", `{"actorReference":"me"}`); code != 200 {
		t.Fatalf("submit after the return: %d %s", code, b)
	}
	if resp, b := sites.do(t, "GET", "/v1/gis/collections/sites/items?accessProfile=public", "", ""); resp.StatusCode != 200 {
		t.Fatalf("GIS items after the return: %d %s", resp.StatusCode, b)
	}
	parcels.create(t, "parcels", `{"parcelCode":"P-1","area":2}`)
	got := rcv.wait(t, 2, 60*time.Second)
	if !strings.Contains(string(got[1].body), "P-1") {
		t.Fatalf("the delivery after the return is not P-1's: %s", got[1].body)
	}

	// 2. The postmaster killed (SIGKILL), then started again.
	outage(oc.kill9)
	claims.create(t, "claims", `{"text":"after the crash"}`)
	parcels.create(t, "parcels", `{"parcelCode":"P-2","area":3}`)
	got = rcv.wait(t, 3, 60*time.Second)
	if !strings.Contains(string(got[2].body), "P-2") {
		t.Fatalf("the delivery after the crash is not P-2's: %s", got[2].body)
	}
	if l := log.String(); strings.Contains(l, `"status":500`) || strings.Contains(l, `"msg":"request failed"`) {
		t.Fatalf("a request failed with 500:\n%s", l)
	}
}
