package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net"
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
	"github.com/registrum/registrum/issuer/issuertest"
	"github.com/registrum/registrum/store/storetest"
)

// startServe runs `registrum serve` on a free port with the package and
// database given, and waits until it is ready. It drains for no time when
// stopped (listener.drainSeconds: 0).
func startServe(t *testing.T, dir, pkg, dsn, extra string) string {
	t.Helper()
	return startServeDraining(t, dir, pkg, dsn, extra, 0).base
}

// servedHost is a running `registrum serve`.
type servedHost struct {
	cmd    *exec.Cmd
	base   string
	stderr *syncBuffer
	// exited is closed once the process has exited (cmd.ProcessState is
	// then set).
	exited chan struct{}
}

// startServeDraining is startServe with the listener's drain delay, and
// returns the process and its standard error too. The process gets SIGTERM
// when t ends, unless it has exited.
func startServeDraining(t *testing.T, dir, pkg, dsn, extra string, drainSeconds int) *servedHost {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	port := ln.Addr().(*net.TCPAddr).Port
	ln.Close()
	os.MkdirAll(filepath.Join(dir, "secrets"), 0o700)
	os.WriteFile(filepath.Join(dir, "secrets", "host-key"), bytes.Repeat([]byte{9}, 32), 0o600)
	cfg := filepath.Join(dir, fmt.Sprintf("host-%d.yaml", port))
	os.WriteFile(cfg, []byte(fmt.Sprintf("version: 1\nlistener: {address: 127.0.0.1, port: %d, drainSeconds: %d}\ndatabase: {url: %q}\npackage: %s\nsecrets: {root: secrets}\nhostKeyRef: secret:file/host-key\n%s", port, drainSeconds, dsn, pkg, extra)), 0o600)
	cmd := exec.Command(binary, "serve", "--config", cfg)
	stderr, exited := startBackground(t, cmd)
	base := fmt.Sprintf("http://127.0.0.1:%d", port)
	deadline := time.Now().Add(30 * time.Second)
	for {
		resp, err := http.Get(base + "/ready")
		if err == nil {
			resp.Body.Close()
			if resp.StatusCode == 200 {
				return &servedHost{cmd: cmd, base: base, stderr: stderr, exited: exited}
			}
		}
		if time.Now().After(deadline) {
			t.Fatalf("registrum serve not ready:\n%s", stderr.String())
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// bearer is the access token the calls of a test present.
var bearer string

func call(t *testing.T, method, url, ctype, body string, hdr ...string) (int, http.Header, string) {
	t.Helper()
	req, _ := http.NewRequest(method, url, strings.NewReader(body))
	if bearer != "" {
		req.Header.Set("Authorization", "Bearer "+bearer)
	}
	if ctype != "" {
		req.Header.Set("Content-Type", ctype)
	}
	for i := 0; i+1 < len(hdr); i += 2 {
		req.Header.Set(hdr[i], hdr[i+1])
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, resp.Header, string(b)
}

func TestTwoHostsOnOneDatabaseKeepConstraintsIdempotencyAndIfMatch(t *testing.T) {
	dir := t.TempDir()
	pkg := filepath.Join(dir, "package")
	if out, err := exec.Command(binary, "compile", "../../project/testdata/minimal", "--out", pkg).CombinedOutput(); err != nil {
		t.Fatalf("compile: %v\n%s", err, out)
	}
	dsn := storetest.NewDatabase(t)
	is := authtest.StartIssuer(t, issuertest.DevOptions{Scopes: []string{"parcels:write"}}, nil)
	auth := is.HostAuthentication()
	bearer = is.Token(t, issuertest.StandardClientID)
	t.Cleanup(func() { bearer = "" })
	served := []*servedHost{startServeDraining(t, dir, pkg, dsn, auth, 0), startServeDraining(t, dir, pkg, dsn, auth, 0)}
	hosts := []string{served[0].base, served[1].base}
	t.Cleanup(func() {
		if t.Failed() {
			for i, h := range served {
				t.Logf("host %d's standard error:\n%s", i, h.stderr.String())
			}
		}
	})
	// Without the token, the records are concealed.
	saved := bearer
	bearer = ""
	if s, _, b := call(t, "POST", hosts[0]+"/v1/records/parcels", "application/json", `{"data":{"parcelCode":"NO-TOKEN"}}`); s != 404 {
		t.Fatalf("create without a token: %d %s", s, b)
	}
	bearer = saved

	// Unique constraint: the same code created concurrently through both hosts succeeds once.
	var wg sync.WaitGroup
	statuses := make(chan int, 10)
	for i := 0; i < 10; i++ {
		wg.Add(1)
		go func(h string) {
			defer wg.Done()
			s, _, _ := call(t, "POST", h+"/v1/records/parcels", "application/json", `{"data":{"parcelCode":"SAME"}}`)
			statuses <- s
		}(hosts[i%2])
	}
	wg.Wait()
	close(statuses)
	created := 0
	for s := range statuses {
		switch s {
		case 201:
			created++
		case 400:
		default:
			t.Errorf("unexpected status %d", s)
		}
	}
	if created != 1 {
		t.Fatalf("%d creates of one unique value succeeded across two hosts, want 1", created)
	}

	// Idempotency: concurrent duplicates through both hosts are one write and one answer.
	answers := make(chan string, 8)
	for i := 0; i < 8; i++ {
		wg.Add(1)
		go func(h string) {
			defer wg.Done()
			s, _, b := call(t, "POST", h+"/v1/records/parcels", "application/json", `{"data":{"parcelCode":"IDEM"}}`, "Idempotency-Key", "two-hosts")
			answers <- fmt.Sprint(s) + b
		}(hosts[i%2])
	}
	wg.Wait()
	close(answers)
	distinct := map[string]bool{}
	for a := range answers {
		distinct[a] = true
	}
	if len(distinct) != 1 {
		t.Fatalf("idempotent duplicates across hosts answered differently: %v", distinct)
	}
	var first string
	for a := range distinct {
		first = a
	}
	if !strings.HasPrefix(first, "201") {
		t.Fatalf("idempotent create answered %s", first)
	}

	// If-Match: a validator from host A is honoured by host B, and a stale one refused by both.
	s, hdr, b := call(t, "POST", hosts[0]+"/v1/records/parcels", "application/json", `{"data":{"parcelCode":"IFM"}}`)
	if s != 201 {
		t.Fatalf("create: %d %s", s, b)
	}
	loc, etag := hdr.Get("Location"), hdr.Get("ETag")
	patch := `[{"op":"replace","path":"/data/area","value":5}]`
	if s, _, b := call(t, "PATCH", hosts[1]+loc, "application/json-patch+json", patch, "If-Match", etag); s != 200 {
		t.Fatalf("patch through the other host: %d %s", s, b)
	}
	for _, h := range hosts {
		s, _, b := call(t, "PATCH", h+loc, "application/json-patch+json", patch, "If-Match", etag)
		var p map[string]any
		json.Unmarshal([]byte(b), &p)
		if s != 412 || p["code"] != "precondition.failed" {
			t.Fatalf("stale If-Match on %s: %d %s", h, s, b)
		}
	}
}

// drainReceiver is a webhook receiver that holds every delivery until
// released, then answers 200.
type drainReceiver struct {
	arrived chan struct{} // closed when the first delivery is being held
	release chan struct{}
	once    sync.Once
	mu      sync.Mutex
	answers int
}

func (h *drainReceiver) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	io.Copy(io.Discard, r.Body)
	h.once.Do(func() { close(h.arrived) })
	<-h.release
	w.WriteHeader(http.StatusOK)
	h.mu.Lock()
	h.answers++
	h.mu.Unlock()
}

// TestSIGTERMDrainsRequestsAndJobs stops `registrum serve` with SIGTERM
// while a request is in flight (its body still arriving) and an event
// delivery job is waiting on its receiver: /ready answers 503 at once while
// the listener still serves for the drain delay; then the listener closes,
// the request completes and is answered, the delivery job finishes and is
// recorded delivered in its first attempt (River stops at a job boundary,
// it does not cancel the job), and the process exits 0.
func TestSIGTERMDrainsRequestsAndJobs(t *testing.T) {
	dir := t.TempDir()
	pkg := filepath.Join(dir, "package")
	if out, err := exec.Command(binary, "compile", "../../host/testdata/events", "--out", pkg).CombinedOutput(); err != nil {
		t.Fatalf("compile: %v\n%s", err, out)
	}
	rcv := &drainReceiver{arrived: make(chan struct{}), release: make(chan struct{})}
	receiver := httptest.NewServer(rcv)
	defer receiver.Close()
	defer func() {
		select {
		case <-rcv.release:
		default:
			close(rcv.release)
		}
	}()
	os.MkdirAll(filepath.Join(dir, "secrets"), 0o700)
	os.WriteFile(filepath.Join(dir, "secrets", "webhook-key"), bytes.Repeat([]byte("k"), 32), 0o600)
	dsn := storetest.NewDatabase(t)
	const drain = 2
	host := startServeDraining(t, dir, pkg, dsn, "instanceId: drain-test\neventDestinations:\n  receiver:\n    url: "+receiver.URL+"/hooks\n"+
		"    hmacSha256KeyRef: secret:file/webhook-key\n    classificationCeiling: internal\n    network: loopback\n", drain)
	base := host.base

	// A delivery in flight: the receiver holds it.
	if s, _, b := call(t, "POST", base+"/v1/records/parcels", "application/json", `{"data":{"parcelCode":"P-1","area":1}}`); s != 201 {
		t.Fatalf("create: %d %s", s, b)
	}
	select {
	case <-rcv.arrived:
	case <-time.After(30 * time.Second):
		t.Fatalf("no delivery arrived:\n%s", host.stderr.String())
	}
	// A request in flight: its body arrives in two parts.
	body, bodyW := io.Pipe()
	slow := make(chan *http.Response, 1)
	slowErr := make(chan error, 1)
	go func() {
		req, _ := http.NewRequest("POST", base+"/v1/records/parcels", body)
		req.Header.Set("Content-Type", "application/json")
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			slowErr <- err
			return
		}
		slow <- resp
	}()
	if _, err := io.WriteString(bodyW, `{"data":{"parcelCode":`); err != nil {
		t.Fatal(err)
	}
	time.Sleep(200 * time.Millisecond) // the handler is reading the body

	sent := time.Now()
	if err := host.cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	// /ready turns 503 first, while the listener still serves.
	waitFor(t, "/ready answering 503 after SIGTERM", 10*time.Second, func() bool {
		resp, err := http.Get(base + "/ready")
		if err != nil {
			t.Fatalf("the listener closed before the drain delay: %v", err)
		}
		resp.Body.Close()
		return resp.StatusCode == 503
	})
	if s, _, b := call(t, "GET", base+"/v1/records/parcels", "", ""); s != 200 {
		t.Fatalf("a request during the drain: %d %s", s, b)
	}
	// Then the listener closes, no earlier than the drain delay.
	waitFor(t, "the listener closing after the drain", 30*time.Second, func() bool {
		resp, err := http.Get(base + "/health")
		if err != nil {
			return true
		}
		resp.Body.Close()
		return false
	})
	if since := time.Since(sent); since < drain*time.Second {
		t.Fatalf("the listener closed %v after SIGTERM, before the %d s drain delay", since, drain)
	}
	select {
	case <-host.exited:
		t.Fatalf("the process exited with a request and a job in flight:\n%s", host.stderr.String())
	default:
	}

	// The request in flight completes and is answered.
	if _, err := io.WriteString(bodyW, `"P-2"}}`); err != nil {
		t.Fatal(err)
	}
	bodyW.Close()
	select {
	case resp := <-slow:
		b, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if resp.StatusCode != 201 {
			t.Fatalf("the request in flight: %d %s", resp.StatusCode, b)
		}
	case err := <-slowErr:
		t.Fatalf("the request in flight was cut: %v\n%s", err, host.stderr.String())
	case <-time.After(30 * time.Second):
		t.Fatal("the request in flight got no answer")
	}
	// The job in flight finishes; then the process exits 0.
	close(rcv.release)
	select {
	case <-host.exited:
	case <-time.After(60 * time.Second):
		t.Fatalf("serve did not exit after SIGTERM:\n%s", host.stderr.String())
	}
	if code := host.cmd.ProcessState.ExitCode(); code != 0 {
		t.Fatalf("serve exited with %d:\n%s", code, host.stderr.String())
	}
	conn, err := pgx.Connect(context.Background(), dsn)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(context.Background())
	var state string
	var attempts int
	rows, err := conn.Query(context.Background(), "SELECT state, attempt FROM registrum.event_deliveries ORDER BY captured_at")
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for rows.Next() {
		rows.Scan(&state, &attempts)
		got = append(got, fmt.Sprintf("%s/%d", state, attempts))
	}
	if rows.Err() != nil {
		t.Fatal(rows.Err())
	}
	// P-1's delivery was in flight at SIGTERM: delivered in its first
	// attempt. P-2's was captured while the workers stopped: worked before
	// they stopped, or left for the next host, never cut.
	if len(got) != 2 || got[0] != "delivered/1" || (got[1] != "pending/0" && got[1] != "delivered/1") {
		t.Fatalf("deliveries after the drain: %v (want delivered/1, then pending/0 or delivered/1)\n%s", got, host.stderr.String())
	}
}

// startBackground starts cmd with its standard error captured; exited is
// closed once it has exited. It gets SIGTERM when t ends, unless it has
// exited, and t waits for it.
func startBackground(t *testing.T, cmd *exec.Cmd) (stderr *syncBuffer, exited chan struct{}) {
	t.Helper()
	stderr = &syncBuffer{}
	cmd.Stderr = stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	exited = make(chan struct{})
	go func() { cmd.Wait(); close(exited) }()
	t.Cleanup(func() {
		cmd.Process.Signal(syscall.SIGTERM)
		<-exited
	})
	return stderr, exited
}
