package main

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"
)

// TestDevAppliesAChangedProjectOnRestart restarts `registrum dev` on its
// data folder after the project gained an optional field: the host
// activates the changed package on start (the activation path of
// `registrum activate`) instead of asking for a fresh folder. A change
// that would drop a field is refused, naming it and the remedies; the
// remedy command it prints, run as printed, applies the drop.
func TestDevAppliesAChangedProjectOnRestart(t *testing.T) {
	root, err := os.MkdirTemp("", "rgdevact")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(root) })
	os.Chmod(root, 0o755)
	project := filepath.Join(root, "project")
	if err := os.CopyFS(project, os.DirFS("../../examples/childsupport")); err != nil {
		t.Fatal(err)
	}
	data := filepath.Join(root, "data")
	yamlPath := filepath.Join(project, "registry.yaml")
	edit := func(old, new string) {
		t.Helper()
		b, err := os.ReadFile(yamlPath)
		if err != nil || !strings.Contains(string(b), old) {
			t.Fatalf("registry.yaml lacks %q", old)
		}
		os.WriteFile(yamlPath, []byte(strings.ReplaceAll(string(b), old, new)), 0o644)
	}

	run := startDev(t, data, "--project", project)
	run.stop(t, data, syscall.SIGTERM)

	edit("      - {id: opening-hours, type: text, maxLength: 2000}\n", "      - {id: opening-hours, type: text, maxLength: 2000}\n      - {id: desk-phone, type: string, maxLength: 40}\n")
	run = startDev(t, data, "--project", project)
	if !strings.Contains(run.output.String(), "  - entity service-office: new optional field desk-phone\n") {
		t.Errorf("the restart did not activate the changed project:\n%s", run.output.String())
	}
	run.stop(t, data, syscall.SIGTERM)

	edit("      - {id: desk-phone, type: string, maxLength: 40}\n", "")
	ctx, cancel := context.WithTimeout(context.Background(), 120*time.Second)
	defer cancel()
	cmd := exec.CommandContext(ctx, binary, "dev", "--data", data, "--project", project, "--port", "0", "--issuer-port", "0", "--desk-port", "0", "--verifier-port", "0")
	cmd.Dir = filepath.Join("..", "..")
	out, err := cmd.CombinedOutput()
	if err == nil || !strings.Contains(string(out), "entity service-office: field desk-phone is dropped") || !strings.Contains(string(out), "--confirm-destructive") {
		t.Fatalf("a destructive change on restart: %v\n%s", err, out)
	}
	// The remedy printed works as printed: the command line that follows
	// the advice, run through sh from where dev was started.
	var remedy string
	lines := strings.Split(string(out), "\n")
	for i, l := range lines {
		if strings.HasPrefix(l, "Apply them") && i+1 < len(lines) {
			remedy = strings.TrimSpace(lines[i+1])
		}
	}
	if !strings.HasPrefix(remedy, binary+" dev ") || !strings.HasSuffix(remedy, " --confirm-destructive") {
		t.Fatalf("no remedy command in:\n%s", out)
	}
	run = startShell(t, data, remedy)
	if !strings.Contains(run.output.String(), "  - entity service-office: drop field desk-phone") && !strings.Contains(run.output.String(), "desk-phone") {
		t.Errorf("the remedy did not apply the drop:\n%s", run.output.String())
	}
	run.stop(t, data, syscall.SIGTERM)
}
