package main

import (
	"bytes"
	"cmp"
	"context"
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
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/registrum/registrum/store/storetest"
)

// heldReceiver is a webhook receiver whose first request is held until
// released, so the host can be killed in the middle of a delivery.
type heldReceiver struct {
	mu      sync.Mutex
	first   bool
	held    chan struct{}
	release chan struct{}
	got     []http.Header
	byEvent map[string][]http.Header
}

func (r *heldReceiver) ServeHTTP(w http.ResponseWriter, req *http.Request) {
	io.Copy(io.Discard, req.Body)
	r.mu.Lock()
	hold := !r.first
	r.first = true
	r.got = append(r.got, req.Header.Clone())
	id := req.Header.Get("Ce-Id")
	r.byEvent[id] = append(r.byEvent[id], req.Header.Clone())
	r.mu.Unlock()
	if hold {
		close(r.held)
		<-r.release
		return
	}
	w.WriteHeader(http.StatusNoContent)
}

// TestEventDeliveryLosesNothingAfterKill9 kills the host (SIGKILL) while a
// delivery is on its way: after a restart every event is delivered, the
// interrupted one again with its generation's Idempotency-Key, attempt 2.
func TestEventDeliveryLosesNothingAfterKill9(t *testing.T) {
	dir := t.TempDir()
	pkg := filepath.Join(dir, "package")
	if out, err := exec.Command(binary, "compile", "../../host/testdata/events", "--out", pkg).CombinedOutput(); err != nil {
		t.Fatalf("compile: %v\n%s", err, out)
	}
	dsn := storetest.NewDatabase(t)
	os.MkdirAll(filepath.Join(dir, "secrets"), 0o700)
	os.WriteFile(filepath.Join(dir, "secrets", "host-key"), bytes.Repeat([]byte{9}, 32), 0o600)
	os.WriteFile(filepath.Join(dir, "secrets", "webhook-key"), bytes.Repeat([]byte("k"), 32), 0o600)
	rcv := &heldReceiver{held: make(chan struct{}), release: make(chan struct{}), byEvent: map[string][]http.Header{}}
	srv := httptest.NewServer(rcv)
	defer srv.Close()
	defer func() {
		select {
		case <-rcv.release:
		default:
			close(rcv.release)
		}
	}()
	cfg := fmt.Sprintf("version: 1\ndatabase: {url: %q}\npackage: %s\nsecrets: {root: secrets}\nhostKeyRef: secret:file/host-key\n"+
		"instanceId: crash\neventDestinations:\n  receiver: {url: %q, hmacSha256KeyRef: secret:file/webhook-key, classificationCeiling: internal, network: loopback}\n"+
		// Jobs the killed host had fetched but not started are rescued
		// after rescueAfterSeconds (default 120).
		"jobs: {timeoutSeconds: 10, rescueAfterSeconds: 12}\n",
		dsn, pkg, srv.URL+"/hooks/registry")

	first, base := startHost(t, cfg, dir)
	const n = 5
	for i := 0; i < n; i++ {
		if s, _, b := call(t, "POST", base+"/v1/records/parcels", "application/json", fmt.Sprintf(`{"data":{"parcelCode":"K-%d"}}`, i)); s != 201 {
			t.Fatalf("create: %d %s", s, b)
		}
	}
	select {
	case <-rcv.held:
	case <-time.After(30 * time.Second):
		t.Fatal("no delivery came")
	}
	kill9(t, first)
	close(rcv.release)
	rcv.mu.Lock()
	heldHeader := rcv.got[0]
	rcv.mu.Unlock()

	_, _ = startHost(t, cfg, dir)
	list := func() []map[string]any {
		out, err := exec.Command(binary, "deliveries", "list", "--config", filepath.Join(dir, lastConfig(t, dir))).Output()
		if err != nil {
			t.Fatalf("deliveries list: %v", err)
		}
		var doc struct{ Deliveries []map[string]any }
		json.Unmarshal(out, &doc)
		return doc.Deliveries
	}
	deadline := time.Now().Add(90 * time.Second)
	for {
		ds, delivered := list(), 0
		for _, d := range ds {
			if d["state"] == "delivered" {
				delivered++
			}
		}
		if delivered == n {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("after the restart, not every event delivered: %v", ds)
		}
		time.Sleep(200 * time.Millisecond)
	}
	rcv.mu.Lock()
	defer rcv.mu.Unlock()
	if len(rcv.byEvent) != n {
		t.Fatalf("%d events received, want %d", len(rcv.byEvent), n)
	}
	again := rcv.byEvent[heldHeader.Get("Ce-Id")]
	last := again[len(again)-1]
	if len(again) < 2 || last.Get("Idempotency-Key") != heldHeader.Get("Idempotency-Key") || last.Get("X-Registry-Delivery-Attempt") != "2" ||
		last.Get("X-Registry-Event-Generation") != "1" {
		t.Fatalf("the interrupted delivery: first %v, then %d more, last %v", heldHeader, len(again)-1, last)
	}
}

// lastConfig names the newest host configuration startHost wrote in dir.
func lastConfig(t *testing.T, dir string) string {
	t.Helper()
	matches, _ := filepath.Glob(filepath.Join(dir, "host-*.yaml"))
	var newest string
	var at time.Time
	for _, m := range matches {
		if st, err := os.Stat(m); err == nil && st.ModTime().After(at) {
			newest, at = filepath.Base(m), st.ModTime()
		}
	}
	if newest == "" {
		t.Fatal("no host configuration")
	}
	return newest
}

// TestActivateRefusesToStrandPendingDeliveries leaves a delivery pending
// (the host killed before sending it), then activates a package under a
// configuration whose destination moved: refused, nothing changed; under
// the configuration as it was, activation goes through.
func TestActivateRefusesToStrandPendingDeliveries(t *testing.T) {
	dir := t.TempDir()
	pkg := filepath.Join(dir, "package")
	if out, err := exec.Command(binary, "compile", "../../host/testdata/events", "--out", pkg).CombinedOutput(); err != nil {
		t.Fatalf("compile: %v\n%s", err, out)
	}
	dsn := storetest.NewDatabase(t)
	os.MkdirAll(filepath.Join(dir, "secrets"), 0o700)
	os.WriteFile(filepath.Join(dir, "secrets", "host-key"), bytes.Repeat([]byte{9}, 32), 0o600)
	os.WriteFile(filepath.Join(dir, "secrets", "webhook-key"), bytes.Repeat([]byte("k"), 32), 0o600)
	rcv := &heldReceiver{held: make(chan struct{}), release: make(chan struct{}), byEvent: map[string][]http.Header{}}
	srv := httptest.NewServer(rcv)
	defer srv.Close()
	defer close(rcv.release)
	cfgFor := func(url string) string {
		return fmt.Sprintf("version: 1\ndatabase: {url: %q}\npackage: %s\nsecrets: {root: secrets}\nhostKeyRef: secret:file/host-key\n"+
			"instanceId: act\neventDestinations:\n  receiver: {url: %q, hmacSha256KeyRef: secret:file/webhook-key, classificationCeiling: internal, network: loopback}\n",
			dsn, pkg, url)
	}
	host, base := startHost(t, cfgFor(srv.URL+"/hooks/registry"), dir)
	if s, _, b := call(t, "POST", base+"/v1/records/parcels", "application/json", `{"data":{"parcelCode":"A-1"}}`); s != 201 {
		t.Fatalf("create: %d %s", s, b)
	}
	<-rcv.held
	kill9(t, host) // the delivery stays leased, then pending: not ended

	write := func(name, text string) string {
		p := filepath.Join(dir, name)
		os.WriteFile(p, []byte("listener: {address: 127.0.0.1, port: 0}\n"+text), 0o600)
		return p
	}
	moved := write("moved.yaml", cfgFor("http://127.0.0.1:9/hooks/registry"))
	out, err := exec.Command(binary, "activate", pkg, "--config", moved).CombinedOutput()
	if err == nil || !strings.Contains(string(out), "1 pending event deliveries were captured for destination receiver") {
		t.Fatalf("activate with the destination moved: %v\n%s", err, out)
	}
	same := write("same.yaml", cfgFor(srv.URL+"/hooks/registry"))
	if out, err := exec.Command(binary, "activate", pkg, "--config", same).CombinedOutput(); err != nil {
		t.Fatalf("activate with the destination as it was: %v\n%s", err, out)
	}
}

// flakyReceiver answers failing (500 when zero) until healed, then 204,
// recording each delivery's headers.
type flakyReceiver struct {
	failing int
	mu      sync.Mutex
	healed  bool
	got     []http.Header
}

func (r *flakyReceiver) ServeHTTP(w http.ResponseWriter, req *http.Request) {
	io.Copy(io.Discard, req.Body)
	r.mu.Lock()
	defer r.mu.Unlock()
	r.got = append(r.got, req.Header.Clone())
	if !r.healed {
		w.WriteHeader(cmp.Or(r.failing, http.StatusInternalServerError))
		return
	}
	w.WriteHeader(http.StatusNoContent)
}

// TestDeliveriesListAndReplayCommands runs the operator commands as
// processes: a receiver down past the (tightened) attempts leaves a dead
// letter the list shows without values; a replay naming another
// generation is refused with the one value-free message; the right one is
// delivered as generation 2 with a new key.
func TestDeliveriesListAndReplayCommands(t *testing.T) {
	dir := t.TempDir()
	pkg := filepath.Join(dir, "package")
	if out, err := exec.Command(binary, "compile", "../../host/testdata/events", "--out", pkg).CombinedOutput(); err != nil {
		t.Fatalf("compile: %v\n%s", err, out)
	}
	os.MkdirAll(filepath.Join(dir, "secrets"), 0o700)
	os.WriteFile(filepath.Join(dir, "secrets", "host-key"), bytes.Repeat([]byte{9}, 32), 0o600)
	os.WriteFile(filepath.Join(dir, "secrets", "webhook-key"), bytes.Repeat([]byte("k"), 32), 0o600)
	rcv := &flakyReceiver{}
	srv := httptest.NewServer(rcv)
	defer srv.Close()
	dsn := storetest.NewDatabase(t)
	cfg := fmt.Sprintf("version: 1\ndatabase: {url: %q}\npackage: %s\nsecrets: {root: secrets}\nhostKeyRef: secret:file/host-key\n"+
		"instanceId: ops\neventDestinations:\n  receiver: {url: %q, hmacSha256KeyRef: secret:file/webhook-key, classificationCeiling: internal, network: loopback, maximumAttempts: 2}\n",
		dsn, pkg, srv.URL+"/hooks/registry")
	_, base := startHost(t, cfg, dir)
	if s, _, b := call(t, "POST", base+"/v1/records/parcels", "application/json", `{"data":{"parcelCode":"SECRET-CODE-1"}}`); s != 201 {
		t.Fatalf("create: %d %s", s, b)
	}
	cfgPath := filepath.Join(dir, lastConfig(t, dir))
	var dead map[string]any
	waitFor(t, "a dead letter", 30*time.Second, func() bool {
		out, err := exec.Command(binary, "deliveries", "list", "--config", cfgPath, "--state", "dead_lettered").Output()
		if err != nil {
			t.Fatalf("deliveries list: %v", err)
		}
		if strings.Contains(string(out), "SECRET-CODE") {
			t.Fatalf("the list shows a value:\n%s", out)
		}
		var doc struct{ Deliveries []map[string]any }
		json.Unmarshal(out, &doc)
		if len(doc.Deliveries) == 1 {
			dead = doc.Deliveries[0]
		}
		return dead != nil
	})
	if dead["generation"] != float64(1) || dead["attempt"] != float64(2) || dead["payloadAvailable"] != true {
		t.Fatalf("dead letter %v", dead)
	}
	replay := func(gen string) (string, error) {
		out, err := exec.Command(binary, "deliveries", "replay", "--config", cfgPath, "--event-id", dead["eventId"].(string),
			"--delivery-id", dead["deliveryId"].(string), "--expected-generation", gen, "--operator", "test-operator").CombinedOutput()
		return string(out), err
	}
	if out, err := replay("2"); err == nil || !strings.Contains(out, "the delivery is unavailable for replay") {
		t.Fatalf("replay of another generation: %v\n%s", err, out)
	}
	rcv.mu.Lock()
	rcv.healed = true
	first := rcv.got[0]
	rcv.mu.Unlock()
	if out, err := replay("1"); err != nil || !strings.Contains(out, "replayed as generation 2") {
		t.Fatalf("replay: %v\n%s", err, out)
	}
	waitFor(t, "the replayed delivery", 30*time.Second, func() bool {
		rcv.mu.Lock()
		defer rcv.mu.Unlock()
		return len(rcv.got) == 3
	})
	rcv.mu.Lock()
	last := rcv.got[2]
	rcv.mu.Unlock()
	if last.Get("X-Registry-Event-Generation") != "2" || last.Get("X-Registry-Delivery-Attempt") != "1" ||
		last.Get("Idempotency-Key") == first.Get("Idempotency-Key") || last.Get("Ce-Id") != first.Get("Ce-Id") {
		t.Fatalf("replayed delivery %v after %v", last, first)
	}
	// Both the refusal and the replay are audited, with the operator.
	conn, err := pgx.Connect(context.Background(), dsn)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(context.Background())
	rows, _ := conn.Query(context.Background(), "SELECT action || ':' || generation || ':' || operator FROM registrum.event_delivery_audit ORDER BY id")
	audit, err := pgx.CollectRows(rows, pgx.RowTo[string])
	if err != nil || strings.Join(audit, ",") != "replay_refused:1:test-operator,replay:2:test-operator" {
		t.Fatalf("replay audit %v %v", audit, err)
	}
}
