package main

import (
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/registrum/registrum/issuer"
)

// TestConfigCheck runs `registrum config check` as an operator would: a
// valid file with an environment override prints the effective
// configuration naming the variable; a refused override exits 2 naming it;
// the issuer's configuration is checked with --issuer and its secrets never
// appear.
func TestConfigCheck(t *testing.T) {
	dir := t.TempDir()
	cfg := filepath.Join(dir, "registrum.yaml")
	os.WriteFile(cfg, []byte("version: 1\nlistener: {address: 127.0.0.1, port: 8080}\ndatabase: {url: \"host=/run/postgresql dbname=registrum\"}\npackage: package\nsecrets: {root: secrets}\nhostKeyRef: secret:file/host-key\n"), 0o600)

	check := func(env []string, args ...string) (string, int) {
		t.Helper()
		cmd := exec.Command(binary, append([]string{"config", "check"}, args...)...)
		cmd.Env = append(os.Environ(), env...)
		out, err := cmd.CombinedOutput()
		var ee *exec.ExitError
		if errors.As(err, &ee) {
			return string(out), ee.ExitCode()
		}
		if err != nil {
			t.Fatal(err)
		}
		return string(out), 0
	}

	out, code := check([]string{"REGISTRUM_CONFIG_LISTENER_PORT=9443"}, "--config", cfg)
	if code != 0 || !strings.Contains(out, "is valid") || !strings.Contains(out, "#   listener.port from REGISTRUM_CONFIG_LISTENER_PORT") || !strings.Contains(out, "port: 9443") {
		t.Fatalf("exit %d:\n%s", code, out)
	}
	out, code = check([]string{"REGISTRUM_CONFIG_LISTENER_PORT=http"}, "--config", cfg)
	if code != 2 || !strings.Contains(out, "REGISTRUM_CONFIG_LISTENER_PORT") {
		t.Fatalf("a refused override: exit %d:\n%s", code, out)
	}

	setup, err := issuer.WriteDevSetup(filepath.Join(dir, "issuer"), issuer.DevOptions{Port: 18080})
	if err != nil {
		t.Fatal(err)
	}
	out, code = check([]string{issuer.EnvPrefix + "ACCESS_TOKENS_LIFETIME_SECONDS=300"}, "--issuer", "--config", setup.ConfigPath)
	if code != 0 || !strings.Contains(out, "accessTokens.lifetimeSeconds from "+issuer.EnvPrefix+"ACCESS_TOKENS_LIFETIME_SECONDS") || !strings.Contains(out, "lifetimeSeconds: 300") {
		t.Fatalf("issuer: exit %d:\n%s", code, out)
	}
	hashKey, _ := os.ReadFile(filepath.Join(filepath.Dir(setup.ConfigPath), "secrets", "audit-hash-key"))
	if len(hashKey) == 0 || strings.Contains(out, string(hashKey)) {
		t.Fatalf("the audit hash key is missing from the setup or printed:\n%s", out)
	}
}
