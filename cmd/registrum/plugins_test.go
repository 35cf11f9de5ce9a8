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
	_, _, code = runPluginsCmd(t, capturedBody, "plugins", "run", "--engine", "wasm", "--kind", "hook-handler", "--module", wasm, "--cache-dir", filepath.Join(dir, "cache"))
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

const zeros = "0000000000000000000000000000000000000000000000000000000000000000"

// capturedBody is a captured event body, the input of a hook handler.
const capturedBody = `{"causation":{"hop":0,"root":"0b9d3a3e-8c1e-4f7a-9f59-7a1f7f0b8a10"},"data":{"entity":"site","packageRevision":"sha256:` + zeros + `","recordId":"s-1","revision":1,"trigger":"created","values":{"site-code":"S1"}},"dataschema":"urn:engine:event-schema:sites:site:site-created:sha256:` + zeros + `","id":"0b9d3a3e-8c1e-4f7a-9f59-7a1f7f0b8a10","source":"urn:engine:registry:sites:instance:a","subject":{"recordReference":"hmac-sha256:` + zeros + `","recordRevision":1},"time":"2026-11-22T00:00:00.000Z","type":"site.created"}`

// TestPluginsRunBadInputExitsTwo: an input that is not the module's kind of
// document (not JSON, the wrong member, for a hook handler not a captured
// event body) exits 2, as docs/plugins.md says, in the built binary; an
// input over the byte limit is the runtime's refusal (exit 4).
func TestPluginsRunBadInputExitsTwo(t *testing.T) {
	planner := []string{"plugins", "run", "--engine", "tengo", "--kind", "planner", "--module", examplePlanner, "--cache-dir=off"}
	hook := []string{"plugins", "run", "--engine", "tengo", "--kind", "hook-handler", "--module", "../../examples/plugins/hook/hook.tengo", "--cache-dir=off"}
	for _, c := range []struct {
		args         []string
		stdin        string
		code         int
		stdout, says string
	}{
		{planner, `not json`, exitPluginUsage, "", "bad input"},
		{planner, `{"request":[]}`, exitPluginUsage, "", "input.request"},
		{planner, `{"request":{},"caller":"x"}`, exitPluginUsage, "", "only the member"},
		{hook, `{}`, exitPluginUsage, "", "captured event body"},
		{hook, strings.Replace(capturedBody, `"hop":0`, `"hop":-1`, 1), exitPluginUsage, "", "causation.hop"},
		{hook, capturedBody, 0, `{"outcome":"acknowledged"}` + "\n", ""},
		{append(planner, "--limits", "maxInputBytes=5"), `{"request":{}}`, exitPluginFailed, `{"failure":"refused"}` + "\n", "over the"},
		{append(planner, "--nope"), `{"request":{}}`, exitPluginUsage, "", "unknown flag"},
		{append(planner, "--limits", "wallTime=0s"), `{"request":{}}`, exitPluginUsage, "", "--limits"},
	} {
		cmd := exec.Command(binary, c.args...)
		cmd.Stdin = strings.NewReader(c.stdin)
		var out, errb bytes.Buffer
		cmd.Stdout, cmd.Stderr = &out, &errb
		err := cmd.Run()
		code := 0
		var ee *exec.ExitError
		if errors.As(err, &ee) {
			code = ee.ExitCode()
		} else if err != nil {
			t.Fatal(err)
		}
		if code != c.code || (c.stdout != "" && out.String() != c.stdout) || !strings.Contains(errb.String(), c.says) {
			t.Errorf("%v < %.40s: exit %d, stdout %q, stderr %q; want exit %d saying %q", c.args[4:], c.stdin, code, out.String(), errb.String(), c.code, c.says)
		}
	}
}

// TestPluginsRunWithAPackageChecksTheBinding: with --package the module
// must be one the package pins (by file or id), with its digest, and runs as
// the host runs it: with its capabilities, its plan held to its declared
// writes.
func TestPluginsRunWithAPackageChecksTheBinding(t *testing.T) {
	// The full test project, its planner setting a field beyond its
	// declared writes (status and valid-to): the compiler cannot tell.
	project := t.TempDir()
	if err := os.CopyFS(project, os.DirFS("../../project/testdata/full")); err != nil {
		t.Fatal(err)
	}
	script := filepath.Join(project, "scripts", "plan-merge.tengo")
	src, err := os.ReadFile(script)
	if err != nil {
		t.Fatal(err)
	}
	wide := strings.Replace(string(src), `set: {status: {value: "closed"}}`, `set: {status: {value: "closed"}, label: {value: "gone"}}`, 1)
	if wide == string(src) {
		t.Fatal("edit not applied")
	}
	if err := os.WriteFile(script, []byte(wide), 0o600); err != nil {
		t.Fatal(err)
	}
	pkg := filepath.Join(t.TempDir(), "pkg")
	if _, stderr, code := exitOf(t, "compile", project, "--out", pkg); code != 0 {
		t.Fatalf("compile: exit %d: %s", code, stderr)
	}
	merge := filepath.Join(pkg, "source", "scripts", "plan-merge.tengo")
	run := func(stdin string, args ...string) (string, string, int) {
		return runPluginsCmd(t, stdin, append([]string{"plugins", "run", "--package", pkg, "--cache-dir=off"}, args...)...)
	}
	request := `{"request":{"absorbed":"s-1","survivor":"s-2"}}`

	// Unpinned, the plan is not held to the package's writes; pinned (by
	// file or id) it is, as in the host.
	if out, stderr, code := runPluginsCmd(t, request, "plugins", "run", "--engine", "tengo", "--kind", "planner", "--module", merge, "--cache-dir=off"); code != 0 {
		t.Fatalf("unpinned planner: exit %d, stdout %q, stderr %q", code, out, stderr)
	}
	for _, ref := range []string{merge, "planner.site-merge"} {
		if out, stderr, code := run(request, "--module", ref); code != exitPluginFailed || out != `{"failure":"invalid-output"}`+"\n" || !strings.Contains(stderr, "outside the planner's declared writes") {
			t.Fatalf("pinned planner %s: exit %d, stdout %q, stderr %q", ref, code, out, stderr)
		}
	}
	if out, stderr, code := run(capturedBody, "--module", "hook.site-created"); code != 0 || out != `{"outcome":"acknowledged"}`+"\n" {
		t.Fatalf("pinned hook handler: exit %d, stdout %q, stderr %q", code, out, stderr)
	}
	if _, stderr, code := run(`{}`, "--module", "hook.site-created"); code != exitPluginUsage || !strings.Contains(stderr, "captured event body") {
		t.Fatalf("hook input that is no captured body: exit %d: %s", code, stderr)
	}

	// A module the package does not pin, or pinned as another kind.
	if _, stderr, code := run(`{"request":{}}`, "--module", examplePlanner); code != exitPluginUsage || !strings.Contains(stderr, "pins") {
		t.Fatalf("module not in the package: exit %d: %s", code, stderr)
	}
	if _, stderr, code := run(capturedBody, "--module", "planner.site-merge", "--kind", "hook-handler"); code != exitPluginUsage || !strings.Contains(stderr, "as a tengo planner") {
		t.Fatalf("pinned as another kind: exit %d: %s", code, stderr)
	}

	// The pinned digest: a file changed after compiling does not load.
	if err := os.WriteFile(merge, []byte(wide+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	if _, stderr, code := run(request, "--module", "planner.site-merge"); code == 0 || !strings.Contains(stderr, "sha256") {
		t.Fatalf("changed module: exit %d: %s", code, stderr)
	}
}
