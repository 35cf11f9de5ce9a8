package main

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/registrum/registrum/host/auth/authtest"
	"github.com/registrum/registrum/internal/binarytest"
	"github.com/registrum/registrum/internal/canonjson"
	"github.com/registrum/registrum/issuer/issuertest"
	"github.com/registrum/registrum/store/storetest"
)

// gate is a review authority whose answers the test can hold: a held call
// blocks until released, so the host can be killed in the middle of it.
type gate struct {
	mu       sync.Mutex
	holdPost bool
	holdGet  int // hold the holdGet-th result read (0: none)
	gets     int
	held     chan struct{} // closed when a call is being held
	release  chan struct{}
	posts    int
	byKey    map[string]string
	subs     map[string]map[string]any
	digests  map[string]string
	results  map[string][]byte
}

func newGate() *gate {
	return &gate{byKey: map[string]string{}, subs: map[string]map[string]any{}, digests: map[string]string{}, results: map[string][]byte{},
		held: make(chan struct{}), release: make(chan struct{})}
}

// hold blocks the calling handler until release, once armed.
func (g *gate) hold() {
	close(g.held)
	<-g.release
}

func (g *gate) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if !strings.HasPrefix(r.Header.Get("Authorization"), "Bearer ") {
		http.Error(w, "unauthenticated", http.StatusUnauthorized)
		return
	}
	switch {
	case r.Method == "POST" && r.URL.Path == "/v1/review-requests":
		raw, _ := io.ReadAll(r.Body)
		g.mu.Lock()
		g.posts++
		hold := g.holdPost
		g.holdPost = false
		g.mu.Unlock()
		if hold {
			g.hold()
			return // the host died waiting; nothing was accepted
		}
		canon, _ := canonjson.Transform(raw)
		sum := sha256.Sum256(canon)
		var body map[string]any
		json.Unmarshal(raw, &body)
		g.mu.Lock()
		key := r.Header.Get("Idempotency-Key")
		id, seen := g.byKey[key]
		if !seen {
			id = fmt.Sprintf("rr-%d", len(g.byKey)+1)
			g.byKey[key], g.subs[id], g.digests[id] = id, body, "sha256:"+hex.EncodeToString(sum[:])
		}
		answer := map[string]any{"requestId": id, "subject": g.subs[id]["subject"], "policy": map[string]any{"id": g.subs[id]["kind"]}, "submissionDigest": g.digests[id]}
		g.mu.Unlock()
		w.WriteHeader(http.StatusCreated)
		json.NewEncoder(w).Encode(answer)
	case r.Method == "GET" && strings.HasSuffix(r.URL.Path, "/result"):
		id := strings.TrimSuffix(strings.TrimPrefix(r.URL.Path, "/v1/review-requests/"), "/result")
		g.mu.Lock()
		b, ok := g.results[id]
		hold := false
		if ok {
			g.gets++
			hold = g.gets == g.holdGet
		}
		g.mu.Unlock()
		if hold {
			g.hold()
			return
		}
		if !ok {
			http.NotFound(w, r)
			return
		}
		w.Write(b)
	default:
		http.NotFound(w, r)
	}
}

func (g *gate) approve(id string) {
	g.mu.Lock()
	defer g.mu.Unlock()
	g.results[id], _ = json.Marshal(map[string]any{"resultId": "res-1", "requestId": id, "subject": g.subs[id]["subject"],
		"policy": map[string]any{"id": g.subs[id]["kind"]}, "submissionDigest": g.digests[id], "status": "approved",
		"completedAt": time.Now().UTC().Format(time.RFC3339), "availableUntil": time.Now().Add(time.Hour).UTC().Format(time.RFC3339)})
}

// rearm makes the next held call wait again.
func (g *gate) rearm() {
	g.mu.Lock()
	defer g.mu.Unlock()
	g.held, g.release = make(chan struct{}), make(chan struct{})
}

// startHost starts `registrum serve` from the binary built for the tests
// and returns its process and base URL.
func startHost(t *testing.T, cfgText string, dir string) (*exec.Cmd, string) {
	t.Helper()
	return binarytest.Serve(t, binary, cfgText, dir)
}

func kill9(t *testing.T, cmd *exec.Cmd) {
	t.Helper()
	if err := cmd.Process.Kill(); err != nil { // SIGKILL
		t.Fatal(err)
	}
	cmd.Wait()
}

// requestState reads the request and returns data.request.
func requestState(t *testing.T, base, path string) map[string]any {
	t.Helper()
	s, _, b := call(t, "GET", base+path, "", "")
	if s != 200 {
		t.Fatalf("GET %s: %d %s", path, s, b)
	}
	var env struct {
		Data struct {
			Request map[string]any `json:"request"`
		} `json:"data"`
	}
	json.Unmarshal([]byte(b), &env)
	return env.Data.Request
}

func waitFor(t *testing.T, what string, within time.Duration, cond func() bool) {
	t.Helper()
	for deadline := time.Now().Add(within); !cond(); time.Sleep(100 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("%s: not within %v", what, within)
		}
	}
}

func waitHeld(t *testing.T, g *gate, what string) {
	t.Helper()
	g.mu.Lock()
	held := g.held
	g.mu.Unlock()
	select {
	case <-held:
	case <-time.After(30 * time.Second):
		t.Fatalf("%s: the authority call never came", what)
	}
}

// TestReviewWorkCompletesOnceAfterKill9 kills the host (SIGKILL) while its
// job is sending a submission, and again while its executor applies the
// approved request: after each restart the work completes, exactly once.
func TestReviewWorkCompletesOnceAfterKill9(t *testing.T) {
	dir := t.TempDir()
	pkg := filepath.Join(dir, "package")
	if out, err := exec.Command(binary, "compile", "testdata/reviewed", "--out", pkg).CombinedOutput(); err != nil {
		t.Fatalf("compile: %v\n%s", err, out)
	}
	dsn := storetest.NewDatabase(t)
	is := authtest.StartIssuer(t, issuertest.DevOptions{Scopes: []string{"families:write"}}, nil)
	bearer = is.Token(t, issuertest.StandardClientID)
	t.Cleanup(func() { bearer = "" })
	os.MkdirAll(filepath.Join(dir, "secrets"), 0o700)
	os.WriteFile(filepath.Join(dir, "secrets", "host-key"), bytes.Repeat([]byte{9}, 32), 0o600)
	key, err := os.ReadFile(is.Setup.Clients[0].KeyFile)
	if err != nil {
		t.Fatal(err)
	}
	os.WriteFile(filepath.Join(dir, "secrets", "client.jwk"), key, 0o600)
	g := newGate()
	authority := httptest.NewServer(g)
	defer authority.Close()
	client := fmt.Sprintf("{tokenUrl: %q, clientId: %s, keyRef: secret:file/client.jwk}", is.Setup.TokenURL, issuertest.StandardClientID)
	cfg := fmt.Sprintf("version: 1\ndatabase: {url: %q}\npackage: %s\nsecrets: {root: secrets}\nhostKeyRef: secret:file/host-key\n%s"+
		"reviewAuthorities:\n  casework: {endpoint: %q, profile: test, producerId: reviewed, pollSeconds: 1, client: %s}\n"+
		"executors:\n  clerk-bot: {accessProfile: family, client: %s}\njobs: {timeoutSeconds: 2, rescueAfterSeconds: 3}\n",
		dsn, pkg, is.HostAuthentication(), authority.URL, client, client)

	// 1. Killed while the submission is on its way to the authority.
	g.holdPost = true
	first, base := startHost(t, cfg, dir)
	_, hdr, _ := call(t, "POST", base+"/v1/records/children", "application/json", `{"data":{"name":"Fay"}}`)
	child := hdr.Get("Location")
	_, hdr, _ = call(t, "POST", base+"/v1/records/phone-changes", "application/json", `{"data":{"childId":"`+filepath.Base(child)+`","phone":"123"}}`)
	req := hdr.Get("Location")
	s, _, b := call(t, "POST", base+req+"/actions/submit", "application/json", `{"actorReference":"parent"}`, "If-Match", hdr.Get("ETag"), "Idempotency-Key", "submit-1")
	if s != 200 {
		t.Fatalf("submit: %d %s", s, b)
	}
	waitHeld(t, g, "submission")
	kill9(t, first)
	close(g.release)
	g.rearm()

	second, base := startHost(t, cfg, dir)
	waitFor(t, "the submission accepted after the restart", 90*time.Second, func() bool {
		sub, _ := requestState(t, base, req)["review"].(map[string]any)["submission"].(map[string]any)
		return sub["state"] == "accepted"
	})
	g.mu.Lock()
	accepted, posts := len(g.byKey), g.posts
	g.holdGet = 2 // the poll's read passes; the executor's apply read is held
	rid := ""
	for _, id := range g.byKey {
		rid = id
	}
	g.mu.Unlock()
	if accepted != 1 || posts < 2 {
		t.Fatalf("the authority accepted %d submissions from %d sends", accepted, posts)
	}

	// 2. Killed while the executor applies the approved request.
	g.approve(rid)
	waitHeld(t, g, "automatic apply")
	kill9(t, second)
	close(g.release)
	g.rearm()
	_, base = startHost(t, cfg, dir)
	waitFor(t, "the request applied after the restart", 90*time.Second, func() bool {
		return requestState(t, base, req)["engineState"] == "applied"
	})
	conn, err := pgx.Connect(context.Background(), dsn)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(context.Background())
	var applications, childRevisions int
	conn.QueryRow(context.Background(), "SELECT count(*) FROM registrum.request_applications").Scan(&applications)
	conn.QueryRow(context.Background(), "SELECT count(*) FROM registrum.revisions WHERE entity_id = 'child'").Scan(&childRevisions)
	if applications != 1 || childRevisions != 2 {
		t.Fatalf("applied %d times, the child has %d revisions (want 1 and 2)", applications, childRevisions)
	}
	if s, _, b := call(t, "GET", base+child, "", ""); s != 200 || !strings.Contains(b, `"phone":"123"`) {
		t.Fatalf("child after apply: %d %s", s, b)
	}
}

// TestWorkerRunsAloneAndStopsOnSIGTERM starts `registrum worker`: it opens
// the host without a listener, works jobs, and ends cleanly on SIGTERM.
func TestWorkerRunsAloneAndStopsOnSIGTERM(t *testing.T) {
	dir := t.TempDir()
	pkg := filepath.Join(dir, "package")
	if out, err := exec.Command(binary, "compile", "../../project/testdata/minimal", "--out", pkg).CombinedOutput(); err != nil {
		t.Fatalf("compile: %v\n%s", err, out)
	}
	is := authtest.StartIssuer(t, issuertest.DevOptions{Scopes: []string{"parcels:write"}}, nil)
	os.MkdirAll(filepath.Join(dir, "secrets"), 0o700)
	os.WriteFile(filepath.Join(dir, "secrets", "host-key"), bytes.Repeat([]byte{9}, 32), 0o600)
	cfg := filepath.Join(dir, "host.yaml")
	os.WriteFile(cfg, []byte(fmt.Sprintf("version: 1\nlistener: {address: 127.0.0.1, port: 0}\ndatabase: {url: %q}\npackage: %s\nsecrets: {root: secrets}\nhostKeyRef: secret:file/host-key\n%s",
		storetest.NewDatabase(t), pkg, is.HostAuthentication())), 0o600)
	cmd := exec.Command(binary, "worker", "--config", cfg)
	var stderr syncBuffer
	cmd.Stderr = &stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	waitFor(t, "the workers running", 30*time.Second, func() bool { return strings.Contains(stderr.String(), "record host workers running") })
	cmd.Process.Signal(syscall.SIGTERM)
	done := make(chan error, 1)
	go func() { done <- cmd.Wait() }()
	select {
	case err := <-done:
		if err != nil {
			t.Fatalf("worker exited with %v:\n%s", err, stderr.String())
		}
	case <-time.After(20 * time.Second):
		cmd.Process.Kill()
		t.Fatalf("worker did not stop on SIGTERM:\n%s", stderr.String())
	}
}

// syncBuffer is a bytes.Buffer safe for a process's writes and the test's reads.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}
