package main

import (
	"bytes"
	"errors"
	"net"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/registrum/registrum/issuer"
)

// exitOf runs the binary and returns its stdout, stderr and exit code.
func exitOf(t *testing.T, args ...string) (string, string, int) {
	t.Helper()
	cmd := exec.Command(binary, args...)
	var out, errb bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errb
	err := cmd.Run()
	var ee *exec.ExitError
	switch {
	case errors.As(err, &ee):
		return out.String(), errb.String(), ee.ExitCode()
	case err != nil:
		t.Fatal(err)
	}
	return out.String(), errb.String(), 0
}

// Usage errors exit 2 for every command, as docs/ says.
func TestUsageErrorsExitTwo(t *testing.T) {
	for _, args := range [][]string{
		{"token"},                               // required flags missing
		{"token", "--token-url", "x", "--nope"}, // unknown flag
		{"token", "--token-url", "http://127.0.0.1:1/token", "--client-id", "c", "--key", "/nonexistent"}, // bad key
		{"plugins", "verifier-run", "--binary", "x", "--media-type", "text/plain"},                        // no content file
		{"plugins", "run", "--engine"}, // flag without value
		{"plugins", "run", "--engine", "wasm", "--kind", "planner", "--module", "m", "extra"}, // stray argument
		{"no-such-command"},
	} {
		if _, stderr, code := exitOf(t, args...); code != 2 {
			t.Errorf("%v: exit %d, want 2: %s", args, code, stderr)
		}
	}
}

func TestVersionNamesTheBuild(t *testing.T) {
	out, stderr, code := exitOf(t, "--version")
	if code != 0 || !strings.HasPrefix(out, "registrum ") || !strings.Contains(out, "go1.") {
		t.Fatalf("--version: exit %d: %q %s", code, out, stderr)
	}
}

// A port in use refuses start-up (exit 2, as docs/issuer.md says) before the
// issuer logs that it is ready.
func TestIssuerPortClashIsRefusedBeforeReady(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	setup, err := issuer.WriteDevSetup(filepath.Join(t.TempDir(), "issuer"), issuer.DevOptions{Port: ln.Addr().(*net.TCPAddr).Port})
	if err != nil {
		t.Fatal(err)
	}
	_, stderr, code := exitOf(t, "issuer", "serve", "--config", setup.ConfigPath)
	if code != 2 || !strings.Contains(stderr, "listener") || strings.Contains(stderr, "ready to serve") {
		t.Fatalf("port clash: exit %d:\n%s", code, stderr)
	}
}
