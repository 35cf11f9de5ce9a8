package plugins_test

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/registrum/registrum/internal/canonjson"
	"github.com/registrum/registrum/model"
	"github.com/registrum/registrum/plugins"
	"github.com/registrum/registrum/plugins/contract"
)

// writeFile writes b to dir/name and returns a module pinned to it.
func writeModule(t *testing.T, dir, name string, engine model.Engine, b []byte) plugins.Module {
	t.Helper()
	if err := os.WriteFile(filepath.Join(dir, name), b, 0o600); err != nil {
		t.Fatal(err)
	}
	return plugins.Module{Module: model.Module{ID: strings.TrimSuffix(name, filepath.Ext(name)), Engine: engine, Kind: model.KindPlanner, Path: name, SHA256: canonjson.DigestBytes(b)}}
}

// Hand-made WebAssembly binaries for load checks.
var (
	wasmEmpty = []byte{0x00, 0x61, 0x73, 0x6d, 0x01, 0x00, 0x00, 0x00}
	// Imports env.f, a host function the runtime does not provide.
	wasmImportsEnv = append(append([]byte{}, wasmEmpty...),
		0x01, 0x04, 0x01, 0x60, 0x00, 0x00, // type section: func () -> ()
		0x02, 0x09, 0x01, 0x03, 'e', 'n', 'v', 0x01, 'f', 0x00, 0x00, // import env.f
	)
)

// TestLoadRefusals checks every way a deployment's module list is refused at
// load, each with a message naming the module and the problem.
func TestLoadRefusals(t *testing.T) {
	ctx := context.Background()
	rt := newRuntime(t, plugins.Config{})
	dir := t.TempDir()
	good := writeModule(t, dir, "good.tengo", model.EngineTengo, []byte(okPlan))

	tampered := good
	tampered.ID = "tampered"
	tampered.SHA256 = canonjson.DigestBytes([]byte("the reviewed bytes"))

	missing := good
	missing.ID, missing.Path = "missing", "gone.tengo"

	for _, tc := range []struct {
		name   string
		module plugins.Module
		want   string
	}{
		{"digest mismatch", tampered, "is not the reviewed module"},
		{"missing file", missing, "no such file"},
		{"escaping path", func() plugins.Module { m := good; m.Path = "../good.tengo"; return m }(), "stay inside the package folder"},
		{"absolute path", func() plugins.Module { m := good; m.Path = filepath.Join(dir, "good.tengo"); return m }(), "must be relative"},
		{"unknown engine", func() plugins.Module { m := good; m.Engine = "lua"; return m }(), `engine "lua"`},
		{"unknown kind", func() plugins.Module { m := good; m.Kind = "scheduler"; return m }(), `kind "scheduler"`},
		{"malformed digest", func() plugins.Module { m := good; m.SHA256 = "sha256:ABC"; return m }(), "sha256:<64 lowercase hex>"},
		{"empty id", func() plugins.Module { m := good; m.ID = ""; return m }(), "id is empty"},
		{"not WebAssembly", writeModule(t, dir, "text.wasm", model.EngineWASM, []byte("hello")), "compile WebAssembly"},
		{"missing exports", writeModule(t, dir, "empty.wasm", model.EngineWASM, wasmEmpty), "does not export registrum_abi_version"},
		{"foreign import", writeModule(t, dir, "env.wasm", model.EngineWASM, wasmImportsEnv), "imports env.f"},
		{"tengo syntax", writeModule(t, dir, "bad.tengo", model.EngineTengo, []byte("output = {")), "compile tengo script"},
		{"tengo not UTF-8", writeModule(t, dir, "bin.tengo", model.EngineTengo, []byte{0xff, 0xfe}), "not UTF-8"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			set, err := rt.Load(ctx, []plugins.Module{good, tc.module}, dir)
			if err == nil {
				_ = set.Close(ctx)
				t.Fatal("loaded")
			}
			if !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("error %q does not say %q", err, tc.want)
			}
			if tc.module.ID != "" && !strings.Contains(err.Error(), `"`+tc.module.ID+`"`) {
				t.Fatalf("error %q does not name module %q", err, tc.module.ID)
			}
		})
	}

	t.Run("every problem is listed", func(t *testing.T) {
		_, err := rt.Load(ctx, []plugins.Module{tampered, missing}, dir)
		if err == nil || !strings.Contains(err.Error(), `"tampered"`) || !strings.Contains(err.Error(), `"missing"`) {
			t.Fatalf("want both modules named, got %v", err)
		}
	})
	t.Run("duplicate id", func(t *testing.T) {
		_, err := rt.Load(ctx, []plugins.Module{good, good}, dir)
		if err == nil || !strings.Contains(err.Error(), `id "good" is used twice`) {
			t.Fatalf("got %v", err)
		}
	})
}

// TestCallRefusals checks calls the host refuses before running anything.
func TestCallRefusals(t *testing.T) {
	ctx := context.Background()
	set, err := script(t, plugins.Config{}, model.KindPlanner, okPlan)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := set.Call(ctx, "nope", []byte(`{"request":{}}`)); !errors.Is(err, plugins.ErrUnknownModule) {
		t.Fatalf("unknown module: %v", err)
	}
	if _, err := set.HandleEvent(ctx, "m", []byte(`{}`)); plugins.FailureKindOf(err) != plugins.FailureRefused {
		t.Fatalf("planner called as a hook handler: %v", err)
	}
	for _, in := range []string{`not json`, `[]`, `{"request":[]}`, `{"request":{},"caller":"x"}`, `{}`, `{"request":{}} {}`} {
		if _, err := set.Call(ctx, "m", []byte(in)); plugins.FailureKindOf(err) != plugins.FailureRefused {
			t.Errorf("input %s: want refused, got %v", in, err)
		}
	}
}

// TestWritesEnforced checks a plan with an effect outside the planner's
// declared writes is invalid output, and one inside passes.
func TestWritesEnforced(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir()
	m := writeModule(t, dir, "p.tengo", model.EngineTengo, []byte(`output = {effects: [{id: "e", operation: "patch", target: {entity: "child", fromField: "child_id"}, set: {phone: {value: "1"}}, clear: [input.request.clear]}]}`))
	m.Writes = []contract.Write{{Entity: "child", Operation: contract.OperationPatch, Fields: []string{"phone", "address"}}}
	set := loadOne(t, newRuntime(t, plugins.Config{}), m, dir)
	if _, err := set.Call(ctx, "p", []byte(`{"request":{"clear":"address"}}`)); err != nil {
		t.Fatalf("inside the writes: %v (%v)", err, detail(err))
	}
	_, err := set.Call(ctx, "p", []byte(`{"request":{"clear":"guardian_id"}}`))
	f := requireFailure(t, err, plugins.FailureInvalidOutput)
	if !strings.Contains(f.Detail().Error(), "outside the planner's declared writes") {
		t.Fatalf("detail: %v", f.Detail())
	}
}

// TestVerifyPackage checks a package's pinned modules through its
// package.json, ignoring every other member.
func TestVerifyPackage(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir()
	src, err := os.ReadFile(examplePath("planner/planner.tengo"))
	if err != nil {
		t.Fatal(err)
	}
	if err := os.MkdirAll(filepath.Join(dir, "plugins"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "plugins", "planner.tengo"), src, 0o600); err != nil {
		t.Fatal(err)
	}
	write := func(doc string) string {
		f := filepath.Join(dir, "package.json")
		if err := os.WriteFile(f, []byte(doc), 0o600); err != nil {
			t.Fatal(err)
		}
		return f
	}
	cfg := plugins.Config{CacheDir: cacheDir}
	good := `{"revision":"x","entities":[1,2],"verifiers":[{"id":"v"}],"modules":[{"id":"planner","engine":"tengo","kind":"planner","path":"plugins/planner.tengo","sha256":"` + canonjson.DigestBytes(src) + `"}]}`
	mods, err := plugins.VerifyPackage(ctx, write(good), cfg)
	if err != nil || len(mods) != 1 || mods[0].ID != "planner" {
		t.Fatalf("good package: %v %v", mods, err)
	}
	bad := strings.Replace(good, canonjson.DigestBytes(src), canonjson.DigestBytes([]byte("x")), 1)
	if _, err := plugins.VerifyPackage(ctx, write(bad), cfg); err == nil || !strings.Contains(err.Error(), "is not the reviewed module") {
		t.Fatalf("tampered package: %v", err)
	}
	unknown := strings.Replace(good, `"kind":"planner"`, `"kind":"planner","abi":"x"`, 1)
	if _, err := plugins.VerifyPackage(ctx, write(unknown), cfg); err == nil || !strings.Contains(err.Error(), `unknown field "abi"`) {
		t.Fatalf("unknown member: %v", err)
	}
	if mods, err := plugins.VerifyPackage(ctx, write(`{"revision":"x"}`), cfg); err != nil || len(mods) != 0 {
		t.Fatalf("package without modules: %v %v", mods, err)
	}
	if _, err := plugins.VerifyPackage(ctx, filepath.Join(dir, "none.json"), cfg); err == nil {
		t.Fatal("missing package verified")
	}
}

func TestParseLimits(t *testing.T) {
	l, err := plugins.ParseLimits("memoryPages=256, wallTime=150ms,maxInputBytes=10,maxOutputBytes=20,maxAllocs=30")
	if err != nil {
		t.Fatal(err)
	}
	if l != (plugins.Limits{MemoryPages: 256, WallTime: 150 * time.Millisecond, MaxInputBytes: 10, MaxOutputBytes: 20, MaxAllocs: 30}) {
		t.Fatalf("%+v", l)
	}
	if l, err := plugins.ParseLimits(""); err != nil || l != (plugins.Limits{}) {
		t.Fatalf("empty: %+v %v", l, err)
	}
	if _, err := plugins.ParseLimits("memoryPages=65536"); err != nil {
		t.Fatalf("memory ceiling: %v", err)
	}
	for in, want := range map[string]string{
		"memoryPages=65537":       "memoryPages=65537",
		"memoryPages=0":           "memoryPages=0",
		"wallTime=-1s":            "wallTime=-1s",
		"wallTime=soon":           "wallTime=soon",
		"maxAllocs=0":             "maxAllocs=0",
		"cpu=1":                   `unknown key "cpu"`,
		"wallTime":                "not key=value",
		"maxAllocs=1,maxAllocs=2": "given twice",
	} {
		if _, err := plugins.ParseLimits(in); err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("%s: want error with %q, got %v", in, want, err)
		}
	}
}

func FuzzParseLimits(f *testing.F) {
	f.Add("memoryPages=256,wallTime=1s")
	f.Add("maxAllocs=1,,")
	f.Fuzz(func(t *testing.T, s string) {
		l, err := plugins.ParseLimits(s)
		if err != nil {
			return
		}
		if l.WallTime < 0 || l.MaxAllocs < 0 || l.MaxInputBytes < 0 || l.MaxOutputBytes < 0 || l.MemoryPages > 65536 {
			t.Fatalf("%q parsed to out-of-range limits %+v", s, l)
		}
	})
}

// TestWASMKindMustBeRegistered checks a WebAssembly module declared with a
// kind it registers no handler for is refused at load.
func TestWASMKindMustBeRegistered(t *testing.T) {
	rt := newRuntime(t, plugins.Config{})
	m, dir := pinned(t, "planner", model.EngineWASM, model.KindHookHandler, filepath.Join(wasmDir, "planner.wasm"))
	_, err := rt.Load(context.Background(), []plugins.Module{m}, dir)
	if err == nil || !strings.Contains(err.Error(), "registers no hook-handler handler") {
		t.Fatalf("got %v", err)
	}
}

// TestLoadRefusesACommandModule: a Go module built in command mode (it
// exports _start: built without -buildmode=c-shared) is refused at load,
// naming the module and saying how to build a reactor module; with the
// guest SDK's exports or without them.
func TestLoadRefusesACommandModule(t *testing.T) {
	rt := newRuntime(t, plugins.Config{})
	for _, file := range []string{"command.wasm", "planner-command.wasm"} {
		t.Run(file, func(t *testing.T) {
			m, dir := pinned(t, "cmd", model.EngineWASM, model.KindPlanner, filepath.Join(wasmDir, file))
			set, err := rt.Load(context.Background(), []plugins.Module{m}, dir)
			if err == nil {
				_ = set.Close(context.Background())
				t.Fatal("loaded")
			}
			for _, want := range []string{`"cmd"`, "command mode", "_start", "reactor", "GOOS=wasip1 GOARCH=wasm go build -buildmode=c-shared"} {
				if !strings.Contains(err.Error(), want) {
					t.Errorf("error %q does not say %q", err, want)
				}
			}
		})
	}
}
