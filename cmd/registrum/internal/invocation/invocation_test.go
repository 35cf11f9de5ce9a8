package invocation

import (
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// The command printed names the binary as it was invoked: go run's, a
// name found on PATH, or the path it was started by.
func TestCommand(t *testing.T) {
	dir := t.TempDir()
	bin := filepath.Join(dir, "my registrum")
	if err := os.WriteFile(bin, []byte("#!/bin/sh\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	self := func() (string, error) { return bin, nil }
	onPath := func(string) (string, error) { return bin, nil }
	notOnPath := func(string) (string, error) { return "", exec.ErrNotFound }
	for _, c := range []struct {
		arg0   string
		look   func(string) (string, error)
		want   string
		reason string
	}{
		{"/tmp/go-build123/b001/exe/registrum", notOnPath, GoRun, "go run"},
		{"registrum", onPath, "registrum", "on PATH"},
		{"registrum", notOnPath, "'" + bin + "'", "a name not on PATH: the executable's path"},
		{bin, notOnPath, "'" + bin + "'", "started by its path"},
	} {
		if got := command(c.arg0, self, c.look); got != c.want {
			t.Errorf("%s: %q gives %q, want %q", c.reason, c.arg0, got, c.want)
		}
	}
	if got := command("registrum", func() (string, error) { return "", errors.New("gone") }, notOnPath); got != "registrum" {
		t.Errorf("no executable: %q", got)
	}
}

// A quoted word comes back from sh exactly.
func TestShellQuote(t *testing.T) {
	for _, s := range []string{"plain", "a b", "it's", "it's $HOME `x` \"q\" \\", "bang! it's", "X5O!P%@AP[4\\PZX54(P^)7CC)7}$EICAR", "name eq 'x'"} {
		out, err := exec.Command("sh", "-c", "printf '%s' "+ShellQuote(s)).Output()
		if err != nil || string(out) != s {
			t.Errorf("%q quoted as %s gives back %q (%v)", s, ShellQuote(s), out, err)
		}
		if strings.Contains(s, "!") && strings.HasPrefix(ShellQuote(s), `"`) {
			t.Errorf("%q is double-quoted: bash would expand its !", s)
		}
	}
}
