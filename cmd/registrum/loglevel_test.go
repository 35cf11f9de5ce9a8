package main

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/registrum/registrum/host/auth/authtest"
	"github.com/registrum/registrum/issuer/issuertest"
	"github.com/registrum/registrum/store/storetest"
)

// freePort returns a loopback port nothing listens on.
func freePort(t *testing.T) int {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	return ln.Addr().(*net.TCPAddr).Port
}

// TestLogLevel runs `registrum serve` at the default level and at the
// level REGISTRUM_CONFIG_LOG_LEVEL sets (the logLevel key): at info every
// request is logged, at warn none is; a level that is not one of debug,
// info, warn, error refuses the start naming the variable.
func TestLogLevel(t *testing.T) {
	dir := t.TempDir()
	pkg := filepath.Join(dir, "package")
	if out, err := exec.Command(binary, "compile", "../../project/testdata/minimal", "--out", pkg).CombinedOutput(); err != nil {
		t.Fatalf("compile: %v\n%s", err, out)
	}
	dsn := storetest.NewDatabase(t)
	is := authtest.StartIssuer(t, issuertest.DevOptions{Scopes: []string{"parcels:write"}}, nil)
	auth := is.HostAuthentication()

	requestLogged := func(h *servedHost) bool {
		resp, err := http.Get(h.base + "/health")
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		// The request line is written after the answer: wait for it a little.
		deadline := time.Now().Add(2 * time.Second)
		for time.Now().Before(deadline) {
			if strings.Contains(h.stderr.String(), `"msg":"request"`) {
				return true
			}
			time.Sleep(20 * time.Millisecond)
		}
		return false
	}
	if h := startServeDraining(t, dir, pkg, dsn, auth, 0); !requestLogged(h) {
		t.Fatalf("default level: no request line:\n%s", h.stderr.String())
	}
	t.Setenv("REGISTRUM_CONFIG_LOG_LEVEL", "warn")
	if h := startServeDraining(t, dir, pkg, dsn, auth, 0); requestLogged(h) {
		t.Fatalf("logLevel warn: a request line was written:\n%s", h.stderr.String())
	} else if strings.Contains(h.stderr.String(), `"level":"INFO"`) {
		t.Fatalf("logLevel warn: an info line was written:\n%s", h.stderr.String())
	}

	t.Setenv("REGISTRUM_CONFIG_LOG_LEVEL", "verbose")
	cfg := filepath.Join(dir, "bad-level.yaml")
	os.WriteFile(cfg, []byte(fmt.Sprintf("version: 1\nlistener: {address: 127.0.0.1, port: %d}\ndatabase: {url: %q}\npackage: %s\nsecrets: {root: secrets}\nhostKeyRef: secret:file/host-key\n%s", freePort(t), dsn, pkg, auth)), 0o600)
	out, err := exec.Command(binary, "serve", "--config", cfg).CombinedOutput()
	if err == nil || !strings.Contains(string(out), "REGISTRUM_CONFIG_LOG_LEVEL") || !strings.Contains(string(out), "debug, info, warn, error") {
		t.Fatalf("logLevel verbose: %v\n%s", err, out)
	}
}

// TestWorkerServesMetrics runs `registrum worker` with a metrics listener
// in its configuration: it serves the record host's metrics there, and the
// Go runtime's, which show the collector's target: registrum's default of
// 200 without GOGC in the environment, GOGC's value with it.
func TestWorkerServesMetrics(t *testing.T) {
	for _, gogc := range []string{"", "100"} {
		want := "go_gc_gogc_percent 200\n"
		if gogc != "" {
			want = "go_gc_gogc_percent " + gogc + "\n"
		}
		t.Run("GOGC="+gogc, func(t *testing.T) {
			b := workerMetrics(t, gogc)
			if !bytes.Contains(b, []byte("\n"+want)) {
				t.Errorf("the worker's metrics lack %q", want)
			}
		})
	}
}

// workerMetrics starts `registrum worker` (with GOGC=gogc in its
// environment unless empty) and returns its first answer to GET /metrics,
// after checking it holds the record host's metrics.
func workerMetrics(t *testing.T, gogc string) []byte {
	dir := t.TempDir()
	pkg := filepath.Join(dir, "package")
	if out, err := exec.Command(binary, "compile", "../../project/testdata/minimal", "--out", pkg).CombinedOutput(); err != nil {
		t.Fatalf("compile: %v\n%s", err, out)
	}
	dsn := storetest.NewDatabase(t)
	is := authtest.StartIssuer(t, issuertest.DevOptions{Scopes: []string{"parcels:write"}}, nil)
	os.MkdirAll(filepath.Join(dir, "secrets"), 0o700)
	os.WriteFile(filepath.Join(dir, "secrets", "host-key"), bytes.Repeat([]byte{9}, 32), 0o600)
	port := freePort(t)
	cfg := filepath.Join(dir, "worker.yaml")
	os.WriteFile(cfg, []byte(fmt.Sprintf("version: 1\nlistener: {address: 127.0.0.1, port: %d}\nmetrics: {address: 127.0.0.1, port: %d}\ndatabase: {url: %q}\npackage: %s\nsecrets: {root: secrets}\nhostKeyRef: secret:file/host-key\n%s",
		freePort(t), port, dsn, pkg, is.HostAuthentication())), 0o600)
	cmd := exec.Command(binary, "worker", "--config", cfg)
	cmd.Env = os.Environ()
	for i, kv := range cmd.Env {
		if strings.HasPrefix(kv, "GOGC=") {
			cmd.Env = append(cmd.Env[:i:i], cmd.Env[i+1:]...)
			break
		}
	}
	if gogc != "" {
		cmd.Env = append(cmd.Env, "GOGC="+gogc)
	}
	stderr, exited := startBackground(t, cmd)
	url := fmt.Sprintf("http://127.0.0.1:%d/metrics", port)
	deadline := time.Now().Add(30 * time.Second)
	for {
		if resp, err := http.Get(url); err == nil {
			b, _ := io.ReadAll(resp.Body)
			resp.Body.Close()
			if resp.StatusCode != 200 {
				t.Fatalf("GET /metrics: %d %s", resp.StatusCode, b)
			}
			for _, name := range []string{"registrum_host_pool_total_connections", "registrum_host_auth_refusals_total", "registrum_host_change_requests", "registrum_events_delivered_total"} {
				if !bytes.Contains(b, []byte("\n"+name)) {
					t.Errorf("the worker's metrics lack %s", name)
				}
			}
			return b
		}
		select {
		case <-exited:
			t.Fatalf("registrum worker exited:\n%s", stderr.String())
		default:
		}
		if time.Now().After(deadline) {
			t.Fatalf("the worker's metrics listener never answered:\n%s", stderr.String())
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// TestIssuerLogLevelFlag: issuer serve refuses an unknown level before it
// reads its configuration, naming the flag.
func TestIssuerLogLevelFlag(t *testing.T) {
	out, err := exec.Command(binary, "issuer", "serve", "--config", "/nonexistent.yaml", "--log-level", "verbose").CombinedOutput()
	var ee *exec.ExitError
	if !errors.As(err, &ee) || ee.ExitCode() != 2 || !strings.Contains(string(out), "--log-level") {
		t.Fatalf("exit %v:\n%s", err, out)
	}
}
