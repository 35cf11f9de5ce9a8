package plugins_test

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"sync"
	"testing"

	"github.com/registrum/registrum/internal/canonjson"
	"github.com/registrum/registrum/model"
	"github.com/registrum/registrum/plugins"
)

// Paths filled by TestMain: the WebAssembly modules built for the tests, the
// example scripts, and a compilation cache shared by every Runtime.
var (
	wasmDir  string
	cacheDir string
	repoRoot string
)

// guestBuilds are the WebAssembly modules the tests build from source.
var guestBuilds = map[string]string{
	"planner.wasm": "./examples/plugins/planner/wasm",
	// The same planner with the map-based guest API (benchmark, equivalence).
	"planner-map.wasm": "./plugins/testdata/plannermap",
	"hook.wasm":        "./examples/plugins/hook/wasm",
	"hostile.wasm":     "./plugins/testdata/hostile",
}

// commandBuilds are modules built in command mode (with _start, without
// -buildmode=c-shared): the runtime must refuse them, saying how to build a
// reactor.
var commandBuilds = map[string]string{
	"command.wasm": "./plugins/testdata/command",
	// The example planner, built without -buildmode=c-shared.
	"planner-command.wasm": "./examples/plugins/planner/wasm",
}

func TestMain(m *testing.M) {
	os.Exit(runMain(m))
}

func runMain(m *testing.M) int {
	var err error
	if repoRoot, err = filepath.Abs(".."); err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	tmp, err := os.MkdirTemp("", "plugins-test")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	defer os.RemoveAll(tmp)
	wasmDir = filepath.Join(tmp, "wasm")
	cacheDir = filepath.Join(tmp, "cache")
	if err := buildGuests(wasmDir); err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	return m.Run()
}

// buildGuests builds every guest module into dir, in parallel.
func buildGuests(dir string) error {
	var wg sync.WaitGroup
	errs := make(chan error, len(guestBuilds)+len(commandBuilds))
	build := func(out, pkg string, args ...string) {
		wg.Add(1)
		go func() {
			defer wg.Done()
			cmd := exec.Command("go", append(append([]string{"build"}, args...), "-o", filepath.Join(dir, out), pkg)...)
			cmd.Dir = repoRoot
			cmd.Env = append(os.Environ(), "GOOS=wasip1", "GOARCH=wasm")
			if b, err := cmd.CombinedOutput(); err != nil {
				errs <- fmt.Errorf("build %s: %v\n%s", pkg, err, b)
			}
		}()
	}
	for out, pkg := range guestBuilds {
		build(out, pkg, "-buildmode=c-shared")
	}
	for out, pkg := range commandBuilds {
		build(out, pkg)
	}
	wg.Wait()
	close(errs)
	return <-errs
}

// newRuntime returns a Runtime using the shared compilation cache.
func newRuntime(t testing.TB, cfg plugins.Config) *plugins.Runtime {
	t.Helper()
	cfg.CacheDir = cacheDir
	rt, err := plugins.NewRuntime(context.Background(), cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = rt.Close(context.Background()) })
	return rt
}

// pinned returns a module declaration for file, pinned to its own digest,
// with Path relative to the file's folder.
func pinned(t testing.TB, id string, engine model.Engine, kind model.ModuleKind, file string) (plugins.Module, string) {
	t.Helper()
	b, err := os.ReadFile(file)
	if err != nil {
		t.Fatal(err)
	}
	return plugins.Module{Module: model.Module{ID: id, Engine: engine, Kind: kind, Path: filepath.Base(file), SHA256: canonjson.DigestBytes(b)}}, filepath.Dir(file)
}

// loadOne loads one module into a new Set on rt.
func loadOne(t testing.TB, rt *plugins.Runtime, m plugins.Module, dir string) *plugins.Set {
	t.Helper()
	set, err := rt.Load(context.Background(), []plugins.Module{m}, dir)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = set.Close(context.Background()) })
	return set
}

func examplePath(rel string) string { return filepath.Join(repoRoot, "examples", "plugins", rel) }
