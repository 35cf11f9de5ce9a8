package main

import (
	"bytes"
	"context"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/registrum/registrum/internal/canonjson"
)

// runPluginsCmd runs the root command with args and stdin, returning stdout,
// stderr and the process exit code the binary would use.
func runPluginsCmd(t *testing.T, stdin string, args ...string) (string, string, int) {
	t.Helper()
	root := newRootCmd()
	var out, errOut bytes.Buffer
	root.SetIn(strings.NewReader(stdin))
	root.SetOut(&out)
	root.SetErr(&errOut)
	root.SetArgs(args)
	err := root.ExecuteContext(context.Background())
	code := 0
	if err != nil {
		code = 1
		var ee *exitError
		if errors.As(err, &ee) {
			code = ee.code
		}
		errOut.WriteString(err.Error())
	}
	return out.String(), errOut.String(), code
}

const examplePlanner = "../../examples/plugins/planner/planner.tengo"

func TestPluginsRunTengo(t *testing.T) {
	cache := "--cache-dir=off"
	out, stderr, code := runPluginsCmd(t, `{"request":{"child_id":"c-1","phone":null,"address":{"city":"Lomé"}}}`,
		"plugins", "run", "--engine", "tengo", "--kind", "planner", "--module", examplePlanner, cache)
	want := `{"effects":[{"clear":["phone"],"id":"update_child","operation":"patch","set":{"address":{"fromField":"address"}},"target":{"entity":"child","fromField":"child_id"}}]}` + "\n"
	if code != 0 || out != want {
		t.Fatalf("exit %d, stdout %q, stderr %q", code, out, stderr)
	}

	dir := t.TempDir()
	loop := filepath.Join(dir, "loop.tengo")
	if err := os.WriteFile(loop, []byte("for {}"), 0o600); err != nil {
		t.Fatal(err)
	}
	out, stderr, code = runPluginsCmd(t, `{"request":{}}`, "plugins", "run", "--engine", "tengo", "--kind", "planner", "--module", loop, "--limits", "wallTime=50ms", cache)
	if code != exitPluginFailed || out != `{"failure":"timeout"}`+"\n" || !strings.Contains(stderr, "wall-time") {
		t.Fatalf("loop: exit %d, stdout %q, stderr %q", code, out, stderr)
	}

	out, _, code = runPluginsCmd(t, `{"request":{}}`, "plugins", "run", "--engine", "tengo", "--kind", "planner", "--module", examplePlanner, "--limits", "maxInputBytes=5", cache)
	if code != exitPluginFailed || out != `{"failure":"refused"}`+"\n" {
		t.Fatalf("input over the limit: exit %d, stdout %q", code, out)
	}

	bad := filepath.Join(dir, "bad.tengo")
	if err := os.WriteFile(bad, []byte(`os := import("os")`), 0o600); err != nil {
		t.Fatal(err)
	}
	_, stderr, code = runPluginsCmd(t, `{"request":{}}`, "plugins", "run", "--engine", "tengo", "--kind", "planner", "--module", bad, cache)
	if code != exitPluginLoad || !strings.Contains(stderr, "compile tengo script") {
		t.Fatalf("bad script: exit %d, stderr %q", code, stderr)
	}

	for _, args := range [][]string{
		{"--engine", "lua", "--kind", "planner", "--module", examplePlanner},
		{"--engine", "tengo", "--kind", "other", "--module", examplePlanner},
		{"--engine", "tengo", "--kind", "planner"},
		{"--engine", "tengo", "--kind", "planner", "--module", examplePlanner, "--limits", "cpu=1"},
	} {
		_, stderr, code := runPluginsCmd(t, `{}`, append([]string{"plugins", "run"}, args...)...)
		if code != exitPluginUsage {
			t.Errorf("%v: exit %d (%s), want %d", args, code, stderr, exitPluginUsage)
		}
	}
}

// TestPluginsRunWASM builds the example planner to WebAssembly and runs it
// through the command.
func TestPluginsRunWASM(t *testing.T) {
	dir := t.TempDir()
	wasm := filepath.Join(dir, "planner.wasm")
	build := exec.Command("go", "build", "-buildmode=c-shared", "-o", wasm, "../../examples/plugins/planner/wasm")
	build.Env = append(os.Environ(), "GOOS=wasip1", "GOARCH=wasm")
	if b, err := build.CombinedOutput(); err != nil {
		t.Fatalf("build: %v\n%s", err, b)
	}
	out, stderr, code := runPluginsCmd(t, `{"request":{"child_id":"c-1","phone":"1 2-3"}}`,
		"plugins", "run", "--engine", "wasm", "--kind", "planner", "--module", wasm, "--cache-dir", filepath.Join(dir, "cache"))
	want := `{"effects":[{"id":"update_child","operation":"patch","set":{"phone":{"value":"123"}},"target":{"entity":"child","fromField":"child_id"}}]}` + "\n"
	if code != 0 || out != want {
		t.Fatalf("exit %d, stdout %q, stderr %q", code, out, stderr)
	}
	_, _, code = runPluginsCmd(t, `{}`, "plugins", "run", "--engine", "wasm", "--kind", "hook-handler", "--module", wasm, "--cache-dir", filepath.Join(dir, "cache"))
	if code != exitPluginLoad {
		t.Fatalf("planner module run as a hook handler: exit %d, want %d", code, exitPluginLoad)
	}
}

func TestPluginsVerify(t *testing.T) {
	dir := t.TempDir()
	src, err := os.ReadFile(examplePlanner)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "planner.tengo"), src, 0o600); err != nil {
		t.Fatal(err)
	}
	pkg := filepath.Join(dir, "package.json")
	write := func(digest string) {
		doc := `{"revision":"r","modules":[{"id":"p","engine":"tengo","kind":"planner","path":"planner.tengo","sha256":"` + digest + `"}]}`
		if err := os.WriteFile(pkg, []byte(doc), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	write(canonjson.DigestBytes(src))
	out, stderr, code := runPluginsCmd(t, "", "plugins", "verify", "--package", pkg, "--cache-dir=off")
	if code != 0 || !strings.HasPrefix(out, "ok p tengo planner planner.tengo sha256:") || !strings.Contains(out, "1 module(s) verified") {
		t.Fatalf("exit %d, stdout %q, stderr %q", code, out, stderr)
	}
	write(canonjson.DigestBytes([]byte("other bytes")))
	_, stderr, code = runPluginsCmd(t, "", "plugins", "verify", "--package", pkg, "--cache-dir=off")
	if code != 1 || !strings.Contains(stderr, `module "p"`) || !strings.Contains(stderr, "is not the reviewed module") {
		t.Fatalf("tampered: exit %d, stderr %q", code, stderr)
	}
	if _, _, code := runPluginsCmd(t, "", "plugins", "verify"); code != exitPluginUsage {
		t.Fatalf("no --package: exit %d", code)
	}
}
