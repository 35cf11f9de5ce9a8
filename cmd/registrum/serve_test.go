package main

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/registrum/registrum/host/auth/authtest"
	"github.com/registrum/registrum/issuer/issuertest"
	"github.com/registrum/registrum/store/storetest"
)

// startServe runs `registrum serve` on a free port with the package and
// database given, and waits until it is ready.
func startServe(t *testing.T, dir, pkg, dsn, extra string) string {
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
	os.WriteFile(cfg, []byte(fmt.Sprintf("version: 1\nlistener: {address: 127.0.0.1, port: %d}\ndatabase: {url: %q}\npackage: %s\nsecrets: {root: secrets}\nhostKeyRef: secret:file/host-key\n%s", port, dsn, pkg, extra)), 0o600)
	cmd := exec.Command(binary, "serve", "--config", cfg)
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		cmd.Process.Signal(syscall.SIGTERM)
		cmd.Wait()
	})
	base := fmt.Sprintf("http://127.0.0.1:%d", port)
	deadline := time.Now().Add(30 * time.Second)
	for {
		resp, err := http.Get(base + "/ready")
		if err == nil {
			resp.Body.Close()
			if resp.StatusCode == 200 {
				return base
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
	hosts := []string{startServe(t, dir, pkg, dsn, auth), startServe(t, dir, pkg, dsn, auth)}
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
