// Package binarytest builds the registrum binary and starts `registrum
// serve` from it, for tests that run the real process: the process-level
// tests of cmd/registrum and the ingestion report (bench/).
package binarytest

import (
	"bytes"
	"fmt"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"testing"
	"time"
)

// Package is the import path of the binary's main package.
const Package = "github.com/registrum/registrum/cmd/registrum"

// Build builds the registrum binary into dir and returns its path; the
// compiler's output goes to the test process's standard error.
func Build(dir string) (string, error) {
	binary := filepath.Join(dir, "registrum")
	build := exec.Command("go", "build", "-o", binary, Package)
	build.Stdout, build.Stderr = os.Stderr, os.Stderr
	if err := build.Run(); err != nil {
		return "", fmt.Errorf("build registrum: %w", err)
	}
	return binary, nil
}

// Serve starts `binary serve` with the configuration cfgText, written to
// dir with a listener on a free loopback port, waits until it answers
// /ready (30 s at most), and returns its process and base URL. The
// process is killed when t ends.
func Serve(t testing.TB, binary, cfgText, dir string) (*exec.Cmd, string) {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	port := ln.Addr().(*net.TCPAddr).Port
	ln.Close()
	cfg := filepath.Join(dir, fmt.Sprintf("host-%d.yaml", port))
	if err := os.WriteFile(cfg, []byte(fmt.Sprintf("listener: {address: 127.0.0.1, port: %d}\n%s", port, cfgText)), 0o600); err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(binary, "serve", "--config", cfg)
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cmd.Process.Kill(); cmd.Wait() })
	base := fmt.Sprintf("http://127.0.0.1:%d", port)
	for deadline := time.Now().Add(30 * time.Second); ; time.Sleep(50 * time.Millisecond) {
		if resp, err := http.Get(base + "/ready"); err == nil {
			resp.Body.Close()
			if resp.StatusCode == 200 {
				return cmd, base
			}
		}
		if time.Now().After(deadline) {
			t.Fatalf("registrum serve not ready:\n%s", stderr.String())
		}
	}
}

// examplePlanner is the import path of the example planner's folder: its
// tengo script, and under wasm/ the module that builds it to WebAssembly.
const examplePlanner = "github.com/registrum/registrum/examples/plugins/planner"

// AddExamplePlanner puts the example planner into the project folder
// project, as an author would: its tengo script at scripts/planner.tengo
// and its WebAssembly build at plugins/planner.wasm. Tests run the example
// itself, not a copy kept beside them.
func AddExamplePlanner(t testing.TB, project string) {
	t.Helper()
	dir, err := exec.Command("go", "list", "-f", "{{.Dir}}", examplePlanner+"/plan").Output()
	if err != nil {
		t.Fatalf("locate the example planner: %v", err)
	}
	script, err := os.ReadFile(filepath.Join(filepath.Dir(string(bytes.TrimSpace(dir))), "planner.tengo"))
	if err != nil {
		t.Fatal(err)
	}
	if err := os.MkdirAll(filepath.Join(project, "scripts"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(project, "scripts", "planner.tengo"), script, 0o644); err != nil {
		t.Fatal(err)
	}
	build := exec.Command("go", "build", "-buildmode=c-shared", "-trimpath", "-o", filepath.Join(project, "plugins", "planner.wasm"), examplePlanner+"/wasm")
	build.Env = append(os.Environ(), "GOOS=wasip1", "GOARCH=wasm")
	if out, err := build.CombinedOutput(); err != nil {
		t.Fatalf("build the WebAssembly planner: %v\n%s", err, out)
	}
}
