package main

import (
	"bytes"
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

	"github.com/registrum/registrum/host/auth/authtest"
	"github.com/registrum/registrum/issuer/issuertest"
	"github.com/registrum/registrum/store/storetest"
)

// heldScanner is an http verifier whose first call is held until release;
// every call is then answered approved.
type heldScanner struct {
	mu      sync.Mutex
	calls   int
	held    chan struct{}
	release chan struct{}
}

func (s *heldScanner) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	io.Copy(io.Discard, r.Body)
	s.mu.Lock()
	s.calls++
	first := s.calls == 1
	s.mu.Unlock()
	if first {
		close(s.held)
		<-s.release
	}
	w.Header().Set("Content-Type", "application/json")
	io.WriteString(w, `{"verdict":"approved"}`)
}

// TestVerificationCompletesOnceAfterKill9 kills the host (SIGKILL) while
// its verification job waits for the scanner: after a restart the verdict
// is reached, once, and the attempts before and after are audited.
func TestVerificationCompletesOnceAfterKill9(t *testing.T) {
	dir := t.TempDir()
	sc := &heldScanner{held: make(chan struct{}), release: make(chan struct{})}
	scanSrv := httptest.NewServer(sc)
	defer scanSrv.Close()
	project := filepath.Join(dir, "project")
	if err := os.CopyFS(project, os.DirFS("../../host/testdata/attachments")); err != nil {
		t.Fatal(err)
	}
	yaml, _ := os.ReadFile(filepath.Join(project, "registry.yaml"))
	os.WriteFile(filepath.Join(project, "registry.yaml"), bytes.ReplaceAll(yaml, []byte("VERIFIER_ENDPOINT"), []byte(scanSrv.URL+"/scan")), 0o644)
	pkg := filepath.Join(dir, "package")
	if out, err := exec.Command(binary, "compile", project, "--out", pkg).CombinedOutput(); err != nil {
		t.Fatalf("compile: %v\n%s", err, out)
	}
	dsn := storetest.NewDatabase(t)
	is := authtest.StartIssuer(t, issuertest.DevOptions{Scopes: []string{"families:write"}}, nil)
	bearer = is.Token(t, issuertest.StandardClientID)
	t.Cleanup(func() { bearer = "" })
	os.MkdirAll(filepath.Join(dir, "secrets"), 0o700)
	os.WriteFile(filepath.Join(dir, "secrets", "host-key"), bytes.Repeat([]byte{9}, 32), 0o600)
	os.WriteFile(filepath.Join(dir, "secrets", "scanner-token"), []byte("scanner-secret-token-0123456789\n"), 0o600)
	cfg := fmt.Sprintf("version: 1\ndatabase: {url: %q}\npackage: %s\nsecrets: {root: secrets}\nhostKeyRef: secret:file/host-key\n%s"+
		"jobs: {timeoutSeconds: 2, rescueAfterSeconds: 3}\n", dsn, pkg, is.HostAuthentication())

	first, base := startHost(t, cfg, dir)
	_, hdr, _ := call(t, "POST", base+"/v1/records/claims", "application/json", `{"data":{"text":"crash"}}`)
	loc := hdr.Get("Location")
	s, _, b := call(t, "PATCH", base+loc+"/attachments/scan", "application/octet-stream", "bytes to verify", "If-Match", hdr.Get("ETag"), "Idempotency-Key", "up-1")
	if s != 200 {
		t.Fatalf("upload: %d %s", s, b)
	}
	select {
	case <-sc.held:
	case <-time.After(30 * time.Second):
		t.Fatal("the verifier was never called")
	}
	kill9(t, first)
	close(sc.release)

	_, base = startHost(t, cfg, dir)
	status := func() string {
		_, _, b := call(t, "GET", base+loc, "", "")
		var env struct {
			Data struct {
				DomainData map[string]json.RawMessage `json:"domainData"`
			} `json:"data"`
		}
		json.Unmarshal([]byte(b), &env)
		var slot map[string]any
		json.Unmarshal(env.Data.DomainData["scan"], &slot)
		v, _ := slot["verificationStatus"].(string)
		return v
	}
	waitFor(t, "the verdict after the restart", 90*time.Second, func() bool { return status() == "approved" })
	if s, _, b := call(t, "GET", base+loc+"/attachments/scan?proposalVersion=1", "", ""); s != 200 || !strings.Contains(b, "bytes to verify") {
		t.Fatalf("download after the restart: %d %s", s, b)
	}
	conn, err := pgx.Connect(context.Background(), dsn)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(context.Background())
	var attempts, approvals, verdicts int
	conn.QueryRow(context.Background(), "SELECT count(*) FROM registrum.audit WHERE operation = 'attachment.verify' AND outcome = 'attempt'").Scan(&attempts)
	conn.QueryRow(context.Background(), "SELECT count(*) FROM registrum.audit WHERE operation = 'attachment.verify' AND outcome = 'approved'").Scan(&approvals)
	conn.QueryRow(context.Background(), "SELECT count(*) FROM registrum.attachment_verifications").Scan(&verdicts)
	if attempts < 2 || approvals != 1 || verdicts != 1 {
		t.Fatalf("%d attempts, %d approvals, %d verdicts (want >= 2, 1, 1)", attempts, approvals, verdicts)
	}

	// The operator erases the content: the slot keeps size and hash, the
	// download answers 404, the erasure is audited.
	cfgs, _ := filepath.Glob(filepath.Join(dir, "host-*.yaml"))
	id := filepath.Base(loc)
	out, err := exec.Command(binary, "attachments", "erase", "--config", cfgs[0], "--entity", "claim", "--record", id, "--slot", "scan").CombinedOutput()
	if err != nil || !strings.Contains(string(out), "erased slot scan of claim/"+id+" in 1 proposal version(s); content deleted: true") {
		t.Fatalf("attachments erase: %v %s", err, out)
	}
	if s, _, b := call(t, "GET", base+loc+"/attachments/scan?proposalVersion=1", "", ""); s != 404 {
		t.Fatalf("download after erasure: %d %s", s, b)
	}
	_, _, b = call(t, "GET", base+loc, "", "")
	if !strings.Contains(b, `"erased":true`) || strings.Contains(b, `"contentType"`) {
		t.Fatalf("slot after erasure: %s", b)
	}
	out, err = exec.Command(binary, "attachments", "erase", "--config", cfgs[0], "--entity", "claim", "--record", id, "--slot", "scan").CombinedOutput()
	if err == nil || !strings.Contains(string(out), "holds no content to erase") {
		t.Fatalf("second erase: %v %s", err, out)
	}
	out, err = exec.Command(binary, "attachments", "erase", "--config", cfgs[0], "--entity", "claim", "--record", id, "--slot", "nope").CombinedOutput()
	if err == nil || !strings.Contains(string(out), `has no attachment slot "nope"`) {
		t.Fatalf("erase of an unknown slot: %v %s", err, out)
	}
	var erasures int
	conn.QueryRow(context.Background(), "SELECT count(*) FROM registrum.audit WHERE operation = 'attachment.erase'").Scan(&erasures)
	if erasures != 1 {
		t.Fatalf("%d erasures audited", erasures)
	}
}
