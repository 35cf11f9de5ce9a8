package issuer_test

import (
	"bytes"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/registrum/registrum/issuer"
	"github.com/registrum/registrum/issuer/keys"
)

var (
	buildOnce sync.Once
	binPath   string
	buildErr  error
)

// TestMain removes the registrum binary the process tests built, so that a
// test run leaves nothing in the temporary folder.
func TestMain(m *testing.M) {
	code := m.Run()
	if binPath != "" {
		os.RemoveAll(filepath.Dir(binPath))
	}
	os.Exit(code)
}

// registrumBinary builds the registrum binary once per test run.
func registrumBinary(t *testing.T) string {
	t.Helper()
	buildOnce.Do(func() {
		dir, err := os.MkdirTemp("", "registrum-bin")
		if err != nil {
			buildErr = err
			return
		}
		binPath = filepath.Join(dir, "registrum")
		out, err := exec.Command("go", "build", "-o", binPath, "github.com/registrum/registrum/cmd/registrum").CombinedOutput()
		if err != nil {
			buildErr = fmt.Errorf("go build: %v\n%s", err, out)
		}
	})
	if buildErr != nil {
		t.Fatal(buildErr)
	}
	return binPath
}

func freePort(t *testing.T) int {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	return ln.Addr().(*net.TCPAddr).Port
}

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

func run(t *testing.T, args ...string) (string, string, int) {
	t.Helper()
	cmd := exec.Command(registrumBinary(t), args...)
	var out, errb bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errb
	err := cmd.Run()
	code := 0
	if ee, ok := err.(*exec.ExitError); ok {
		code = ee.ExitCode()
	} else if err != nil {
		t.Fatal(err)
	}
	return out.String(), errb.String(), code
}

func waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(20 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

func TestIssuerProcess(t *testing.T) {
	bin := registrumBinary(t)
	port := freePort(t)
	setup, err := issuer.WriteDevSetup(t.TempDir(), issuer.DevOptions{Port: port})
	if err != nil {
		t.Fatal(err)
	}
	dir := filepath.Dir(setup.ConfigPath)
	base := fmt.Sprintf("http://127.0.0.1:%d", port)

	metricsAddr := fmt.Sprintf("127.0.0.1:%d", freePort(t))
	serve := exec.Command(bin, "issuer", "serve", "--config", setup.ConfigPath, "--metrics-address", metricsAddr)
	logs := &syncBuffer{}
	serve.Stderr = logs
	if err := serve.Start(); err != nil {
		t.Fatal(err)
	}
	exited := make(chan struct{})
	go func() { serve.Wait(); close(exited) }()
	t.Cleanup(func() {
		serve.Process.Signal(syscall.SIGKILL)
		<-exited
	})
	waitFor(t, "ready", func() bool {
		r, err := http.Get(base + "/ready")
		if err != nil {
			return false
		}
		r.Body.Close()
		return r.StatusCode == 200
	})

	// registrum token gets a token from the running issuer.
	std := setup.Clients[0]
	out, stderr, code := run(t, "token", "--token-url", setup.TokenURL, "--client-id", std.ID, "--key", std.KeyFile)
	if code != 0 {
		t.Fatalf("token: exit %d: %s", code, stderr)
	}
	claims := jwtClaims(t, strings.TrimSpace(out))
	if claims["client_id"] != std.ID || claims["scope"] != "records:read records:write" {
		t.Fatalf("claims %v", claims)
	}
	// Given the issuer's URL instead, it learns the token endpoint and the
	// assertion audience (the issuer identifier) from discovery.
	out, stderr, code = run(t, "token", "--issuer", base, "--client-id", std.ID, "--key", std.KeyFile)
	if code != 0 || jwtClaims(t, strings.TrimSpace(out))["client_id"] != std.ID {
		t.Fatalf("token --issuer: exit %d: %s", code, stderr)
	}
	// The token URL as audience (the dev default before #20) is refused.
	out, _, code = run(t, "token", "--token-url", setup.TokenURL, "--audience", setup.TokenURL, "--client-id", std.ID, "--key", std.KeyFile)
	if code != 1 || !strings.Contains(out, "invalid_client") {
		t.Fatalf("token URL audience: exit %d: %s", code, out)
	}

	// A refusal prints the error body and exits 1.
	strangerPriv, _, _ := keys.Generate("ES256")
	raw, _ := strangerPriv.MarshalJSON()
	strangerFile := filepath.Join(dir, "client-keys", "stranger.jwk")
	os.WriteFile(strangerFile, raw, 0o600)
	out, _, code = run(t, "token", "--token-url", setup.TokenURL, "--client-id", "late", "--key", strangerFile)
	if code != 1 || strings.TrimSpace(out) != `{"error":"invalid_client"}` {
		t.Fatalf("unknown client: exit %d, %q", code, out)
	}
	// A group-readable key file is refused before any request.
	os.Chmod(strangerFile, 0o640)
	if _, stderr, code := run(t, "token", "--token-url", setup.TokenURL, "--client-id", "late", "--key", strangerFile); code == 0 || !strings.Contains(stderr, "owner only") {
		t.Fatalf("group-readable key: exit %d %s", code, stderr)
	}
	os.Chmod(strangerFile, 0o600)

	// SIGHUP: a new registration becomes usable.
	strangerPub := strangerPriv.Public()
	pub, _ := strangerPub.MarshalJSON()
	os.WriteFile(filepath.Join(dir, "clients", "late.yaml"), []byte("clientId: late\nprincipal: late-principal\nauthorization:\n  scopes: [x]\nkeys:\n  - "+string(pub)+"\n"), 0o644)
	serve.Process.Signal(syscall.SIGHUP)
	waitFor(t, "reloaded client", func() bool {
		_, _, code := run(t, "token", "--token-url", setup.TokenURL, "--client-id", "late", "--key", strangerFile)
		return code == 0
	})
	// SIGHUP with a broken file: refused, logged, the old registry keeps serving.
	os.WriteFile(filepath.Join(dir, "clients", "broken.yaml"), []byte("clientId: broken\n"), 0o644)
	serve.Process.Signal(syscall.SIGHUP)
	waitFor(t, "reload refusal in the log", func() bool { return strings.Contains(logs.String(), "reload refused") })
	if _, stderr, code := run(t, "token", "--token-url", setup.TokenURL, "--client-id", "late", "--key", strangerFile); code != 0 {
		t.Fatalf("after refused reload: %s", stderr)
	}
	if !strings.Contains(logs.String(), "broken.yaml") {
		t.Fatalf("log does not say which file: %s", logs.String())
	}

	// The metrics listener counts what happened: the tokens released above
	// and the refusals by their OAuth code.
	resp, err := http.Get("http://" + metricsAddr + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	exposition, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	// Four tokens were released (two by URL, the reloaded client twice); at
	// least two requests were refused as invalid_client (the token URL as
	// audience, the unknown client; the reload wait may add more).
	for _, line := range []string{"registrum_issuer_tokens_issued_total 4\n", `registrum_issuer_token_requests_refused_total{error="unsupported_grant_type"} 0`, "registrum_issuer_signer_ready 1", "registrum_issuer_audit_commit_entries_bucket", "go_goroutines"} {
		if !bytes.Contains(exposition, []byte(line)) {
			t.Errorf("/metrics lacks %q:\n%s", line, exposition)
		}
	}
	if m := regexp.MustCompile(`registrum_issuer_token_requests_refused_total\{error="invalid_client"\} (\d+)`).FindSubmatch(exposition); m == nil || atoi(string(m[1])) < 2 {
		t.Errorf("invalid_client refusals not counted: %q", m)
	}
	if r, err := http.Get(base + "/metrics"); err != nil || r.StatusCode == http.StatusOK {
		t.Errorf("the public listener serves /metrics: %v", err)
	} else {
		r.Body.Close()
	}

	// Audit verification beside the running writer.
	out, stderr, code = run(t, "issuer", "audit", "verify", "--config", setup.ConfigPath)
	if code != 0 || !strings.Contains(out, "active-segment: not verified") {
		t.Fatalf("verify while running: exit %d\n%s%s", code, out, stderr)
	}
	// A second writer (on another port: a port in use is refused first) is
	// refused.
	os.Remove(filepath.Join(dir, "clients", "broken.yaml"))
	conf, _ := os.ReadFile(setup.ConfigPath)
	second := filepath.Join(dir, "second.yaml")
	os.WriteFile(second, bytes.Replace(conf, []byte(fmt.Sprintf("port: %d", port)), []byte("port: 0"), 1), 0o644)
	_, stderr, code = run(t, "issuer", "serve", "--config", second)
	if code == 0 || !strings.Contains(stderr, "audit") {
		t.Fatalf("second writer: exit %d %s", code, stderr)
	}

	// Stop; the chain then verifies completely.
	serve.Process.Signal(syscall.SIGTERM)
	select {
	case <-exited:
	case <-time.After(15 * time.Second):
		t.Fatal("issuer did not stop on SIGTERM")
	}
	out, stderr, code = run(t, "issuer", "audit", "verify", "--config", setup.ConfigPath)
	if code != 0 || strings.Contains(out, "not verified") {
		t.Fatalf("verify after stop: exit %d\n%s%s", code, out, stderr)
	}
	// Logs hold no secret: no assertion, token, or key material.
	hashKey, _ := os.ReadFile(filepath.Join(dir, "secrets", "audit-hash-key"))
	for _, secret := range []string{string(hashKey), strings.TrimSpace(string(raw))[:40], "eyJ"} {
		if strings.Contains(logs.String(), secret) {
			t.Fatalf("log holds secret material %q", secret[:10])
		}
	}

	// A tampered chain fails verification with exit 1.
	chain := filepath.Join(dir, "audit", "issuer-audit.jsonl")
	data, _ := os.ReadFile(chain)
	tampered := bytes.Replace(data, []byte(`"issued"`), []byte(`"denied"`), 1)
	os.WriteFile(chain, tampered, 0o600)
	if out, _, code := run(t, "issuer", "audit", "verify", "--config", setup.ConfigPath); code != 1 {
		t.Fatalf("tampered chain: exit %d\n%s", code, out)
	}
}

func TestIssuerProcessRefusesBadConfig(t *testing.T) {
	setup, err := issuer.WriteDevSetup(t.TempDir(), issuer.DevOptions{Port: freePort(t)})
	if err != nil {
		t.Fatal(err)
	}
	text, _ := os.ReadFile(setup.ConfigPath)
	os.WriteFile(setup.ConfigPath, bytes.Replace(text, []byte("lifetimeSeconds: 900"), []byte("lifetimeSeconds: 30"), 1), 0o644)
	_, stderr, code := run(t, "issuer", "serve", "--config", setup.ConfigPath)
	if code == 0 || !strings.Contains(stderr, setup.ConfigPath) || !strings.Contains(stderr, "accessTokens.lifetimeSeconds") || !strings.Contains(stderr, "between 60 and 3600") {
		t.Fatalf("exit %d: %s", code, stderr)
	}
}

func jwtClaims(t *testing.T, tok string) map[string]any {
	t.Helper()
	parts := strings.Split(tok, ".")
	if len(parts) != 3 {
		t.Fatalf("not a JWS: %q", tok)
	}
	raw, err := base64.RawURLEncoding.DecodeString(parts[1])
	if err != nil {
		t.Fatal(err)
	}
	var m map[string]any
	json.Unmarshal(raw, &m)
	return m
}

func atoi(s string) int {
	n, err := strconv.Atoi(s)
	if err != nil {
		return -1
	}
	return n
}
