// Package hosttest starts a record host in a test and calls it: a compiled
// test project with its runtime configuration, the host served over
// loopback HTTP until the test ends, a real token issuer for it, its
// workers, and a caller with a bearer token.
//
// The host's own tests (host/) and the performance reports (bench/) share
// it, so that a report starts the host exactly as the behaviour tests do.
package hosttest

import (
	"bytes"
	"context"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/registrum/registrum/host"
	"github.com/registrum/registrum/host/auth/authtest"
	"github.com/registrum/registrum/host/config"
	"github.com/registrum/registrum/issuer/issuertest"
	"github.com/registrum/registrum/project"
	"github.com/registrum/registrum/store/layout"
)

// TokenIssuer starts a real issuer whose standard demo client holds the
// minimal project's scope (parcels:write), and returns it with the host's
// authentication block.
func TokenIssuer(t testing.TB) (*authtest.Issuer, string) {
	t.Helper()
	is := authtest.StartIssuer(t, issuertest.DevOptions{Scopes: []string{"parcels:write"}}, nil)
	return is, is.HostAuthentication()
}

// Serve opens the host of cfg and serves it over loopback HTTP until t ends.
func Serve(t testing.TB, cfg *config.Config) (*host.Host, *httptest.Server) {
	t.Helper()
	h, err := host.Open(context.Background(), cfg, slog.New(slog.DiscardHandler))
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(h.Handler())
	t.Cleanup(func() {
		srv.Close()
		h.Close()
	})
	return h, srv
}

// Deployment compiles the project in projectDir and writes a runtime
// configuration for it on the database dsn (a host key under secrets/,
// a listener on a free loopback port), with extra appended to it.
func Deployment(t testing.TB, projectDir, dsn string, extra ...string) *config.Config {
	t.Helper()
	dir := t.TempDir()
	res, err := project.Compile(projectDir, project.Options{Fingerprint: layout.Fingerprint})
	if err != nil {
		t.Fatal(err)
	}
	if err := res.Write(filepath.Join(dir, "package")); err != nil {
		t.Fatal(err)
	}
	os.MkdirAll(filepath.Join(dir, "secrets"), 0o700)
	if err := os.WriteFile(filepath.Join(dir, "secrets", "host-key"), bytes.Repeat([]byte{7}, 32), 0o600); err != nil {
		t.Fatal(err)
	}
	cfgPath := filepath.Join(dir, "registrum.yaml")
	cfg := "version: 1\nlistener: {address: 127.0.0.1, port: 0}\ndatabase: {url: \"" + dsn + "\"}\npackage: package\nsecrets: {root: secrets}\nhostKeyRef: secret:file/host-key\n" + strings.Join(extra, "")
	if err := os.WriteFile(cfgPath, []byte(cfg), 0o600); err != nil {
		t.Fatal(err)
	}
	c, err := config.Load(cfgPath)
	if err != nil {
		t.Fatal(err)
	}
	return c
}

// EventKey is the test destinations' signing key: 40 bytes ending in
// whitespace, which must be used as they are.
const EventKey = "a webhook signing key, used as is:  \t \n"

// Destination is the runtime configuration binding destination "receiver"
// to url, with extra settings.
func Destination(url string, extra ...string) string {
	return "instanceId: test-1\neventDestinations:\n  receiver:\n    url: " + url + "\n    hmacSha256KeyRef: secret:file/webhook-key\n" +
		"    classificationCeiling: internal\n    network: loopback\n" + strings.Join(extra, "")
}

// EventsDeployment compiles the events test project in projectDir (the
// host's testdata/events) with its destination bound to url, and writes
// the signing key EventKey.
func EventsDeployment(t testing.TB, projectDir, dsn, url string, extra ...string) *config.Config {
	t.Helper()
	cfg := Deployment(t, projectDir, dsn, Destination(url, extra...))
	if err := os.WriteFile(filepath.Join(filepath.Dir(cfg.Path()), "secrets", "webhook-key"), []byte(EventKey), 0o600); err != nil {
		t.Fatal(err)
	}
	return cfg
}

// RunWorkers works the host's jobs until t ends.
func RunWorkers(t testing.TB, h *host.Host) {
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() {
		defer close(done)
		if err := h.RunWorkers(ctx); err != nil {
			t.Error(err)
		}
	}()
	t.Cleanup(func() { cancel(); <-done })
}

// Caller calls the host at URL, with Token as its bearer token (none when
// empty).
type Caller struct {
	URL, Token string
}

// Do sends one request (ctype, when set, as its Content-Type; hdr as
// pairs of header name and value) and reads the whole answer; it fails the
// test when the request cannot be sent.
func (c Caller) Do(t testing.TB, method, path, ctype, body string, hdr ...string) (*http.Response, []byte) {
	t.Helper()
	resp, b, err := c.Send(method, path, ctype, body, hdr...)
	if err != nil {
		t.Fatal(err)
	}
	return resp, b
}

// Send is Do for a goroutine other than the test's: it returns the error
// of a request that cannot be sent instead of failing the test.
func (c Caller) Send(method, path, ctype, body string, hdr ...string) (*http.Response, []byte, error) {
	req, err := http.NewRequest(method, c.URL+path, strings.NewReader(body))
	if err != nil {
		return nil, nil, err
	}
	if ctype != "" {
		req.Header.Set("Content-Type", ctype)
	}
	if c.Token != "" {
		req.Header.Set("Authorization", "Bearer "+c.Token)
	}
	for i := 0; i+1 < len(hdr); i += 2 {
		req.Header.Set(hdr[i], hdr[i+1])
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return nil, nil, err
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	return resp, b, err
}

// Create POSTs a record of route with data and returns its Location and
// ETag; it fails the test unless the host answers 201.
func (c Caller) Create(t testing.TB, route, data string) (string, string) {
	t.Helper()
	resp, b := c.Do(t, "POST", "/v1/records/"+route, "application/json", `{"data":`+data+`}`)
	if resp.StatusCode != 201 {
		t.Fatalf("create %s: %d %s", route, resp.StatusCode, b)
	}
	return resp.Header.Get("Location"), resp.Header.Get("ETag")
}
