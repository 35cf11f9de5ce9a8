package plugins_test

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/tetratelabs/wazero"
	"github.com/tetratelabs/wazero/imports/wasi_snapshot_preview1"

	"github.com/registrum/registrum/examples/plugins/planner/plan"
	"github.com/registrum/registrum/model"
	"github.com/registrum/registrum/plugins"
	"github.com/registrum/registrum/plugins/contract"
	"github.com/registrum/registrum/plugins/internal/interrupt"
	"github.com/registrum/registrum/sdk/guest"
)

// benchInput is a 2 KiB planner input for the example planner.
func benchInput(tb testing.TB) []byte {
	head := `{"request":{"child_id":"c-0001","guardian":{"name":"Ama Mensah","relationship":"aunt"},"address":{"line1":"4 Rue Haute","city":"Lomé","postcode":"BP 1234"},"phone":"+228 90-12-34-56","notes":"`
	tail := `"}}`
	in := head + strings.Repeat("n", 2048-len(head)-len(tail)) + tail
	if len(in) != 2048 {
		tb.Fatalf("input is %d bytes", len(in))
	}
	return []byte(in)
}

// BenchmarkPlanner compares, in one run, the per-call cost of the example
// planner: the same logic as a plain Go function (the baseline, with and
// without reading its input), Go compiled to WebAssembly (pooled warm
// instance, and a fresh instance per call), and tengo. "engine"
// sub-benchmarks time the sandbox alone; "call" ones add the host's input
// check and output validation and canonicalisation.
//
// The WebAssembly module runs plan.PlanFast (the guest SDK's fast API), so
// the go-func baselines run that natively: "go-func" on an already read
// request (with the fast API, planning writes the output JSON), "go-func+json"
// through guest.RunPlan (read the input, plan, write). "go-func-map" and
// "go-func-map+json" are the same for plan.Plan, the map-based API, which
// "wasm-pooled-map" runs compiled to WebAssembly.
func BenchmarkPlanner(b *testing.B) {
	ctx := context.Background()
	input := benchInput(b)

	b.Run("go-func", func(b *testing.B) {
		var r contract.FieldsReader
		req, err := r.ReadObjectMember(input, "request")
		if err != nil {
			b.Fatal(err)
		}
		var w guest.PlanWriter
		out := make([]byte, 0, 4096)
		for b.Loop() {
			w.Reset(out[:0])
			plan.PlanFast(req, &w)
			out = w.Finish()
		}
	})
	b.Run("go-func+json", func(b *testing.B) {
		guest.HandlePlanFast(plan.PlanFast)
		for b.Loop() {
			_ = guest.RunPlan(input)
		}
	})
	b.Run("go-func-map", func(b *testing.B) {
		req, err := contract.ParseObjectMember(input, "request")
		if err != nil {
			b.Fatal(err)
		}
		for b.Loop() {
			_ = plan.Plan(req)
		}
	})
	b.Run("go-func-map+json", func(b *testing.B) {
		guest.HandlePlan(plan.Plan)
		for b.Loop() {
			_ = guest.RunPlan(input)
		}
	})

	// A generous wall time: the benchmark measures cost, and a loaded CI
	// machine must not turn a slow instantiation into a timeout.
	slack := plugins.Limits{WallTime: 10 * time.Second}
	load := func(b *testing.B, cfg plugins.Config, engine model.Engine, file string) *plugins.Set {
		m, dir := pinned(b, "p", engine, model.KindPlanner, file)
		m.Writes = plan.Writes
		return loadOne(b, newRuntime(b, cfg), m, dir)
	}
	sets := []struct {
		name string
		set  *plugins.Set
	}{
		{"wasm-pooled", load(b, plugins.Config{PoolSize: 1, Limits: slack}, model.EngineWASM, filepath.Join(wasmDir, "planner.wasm"))},
		// The same planner against the map-based guest API (plan.Plan).
		{"wasm-pooled-map", load(b, plugins.Config{PoolSize: 1, Limits: slack}, model.EngineWASM, filepath.Join(wasmDir, "planner-map.wasm"))},
		{"wasm-per-call", load(b, plugins.Config{InstancePerCall: true, Limits: slack}, model.EngineWASM, filepath.Join(wasmDir, "planner.wasm"))},
		{"tengo", load(b, plugins.Config{Limits: slack}, model.EngineTengo, examplePath("planner/planner.tengo"))},
	}
	for _, s := range sets {
		b.Run(s.name+"/engine", func(b *testing.B) {
			for b.Loop() {
				if _, err := s.set.CallEngine(ctx, "p", input); err != nil {
					b.Fatal(err)
				}
			}
		})
		b.Run(s.name+"/call", func(b *testing.B) {
			for b.Loop() {
				if _, err := s.set.Call(ctx, "p", input); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

// warmCache returns a compilation cache folder holding the example planner.
func warmCache(b *testing.B) string {
	dir := b.TempDir()
	ctx := context.Background()
	rt, err := plugins.NewRuntime(ctx, plugins.Config{CacheDir: dir})
	if err != nil {
		b.Fatal(err)
	}
	defer rt.Close(ctx)
	m, mdir := pinned(b, "p", model.EngineWASM, model.KindPlanner, filepath.Join(wasmDir, "planner.wasm"))
	set, err := rt.Load(ctx, []plugins.Module{m}, mdir)
	if err != nil {
		b.Fatal(err)
	}
	_ = set.Close(ctx)
	return dir
}

// BenchmarkLoad measures loading (reading, hashing and compiling) the
// example planner: WebAssembly without a compilation cache, with a warm
// on-disk cache, and tengo.
func BenchmarkLoad(b *testing.B) {
	ctx := context.Background()
	cases := []struct {
		name   string
		engine model.Engine
		file   string
		cache  func(b *testing.B) string
	}{
		{"wasm-cold", model.EngineWASM, filepath.Join(wasmDir, "planner.wasm"), func(*testing.B) string { return "" }},
		{"wasm-disk-cache", model.EngineWASM, filepath.Join(wasmDir, "planner.wasm"), func(b *testing.B) string { return warmCache(b) }},
		{"tengo", model.EngineTengo, examplePath("planner/planner.tengo"), func(*testing.B) string { return "" }},
	}
	for _, tc := range cases {
		b.Run(tc.name, func(b *testing.B) {
			m, dir := pinned(b, "p", tc.engine, model.KindPlanner, tc.file)
			cache := tc.cache(b)
			var total time.Duration
			for b.Loop() {
				rt, err := plugins.NewRuntime(ctx, plugins.Config{CacheDir: cache})
				if err != nil {
					b.Fatal(err)
				}
				start := time.Now()
				set, err := rt.Load(ctx, []plugins.Module{m}, dir)
				total += time.Since(start)
				if err != nil {
					b.Fatal(err)
				}
				_ = set.Close(ctx)
				_ = rt.Close(ctx)
			}
			b.ReportMetric(float64(total.Milliseconds())/float64(b.N), "ms/load")
		})
	}
}

// BenchmarkWASMGuest splits the WebAssembly planner's cost: the example
// planner's entry point called directly through wazero on the 2 KiB input,
// as the runtime compiles it ("checks": the interrupt checks the runtime adds
// to every module, a per-call deadline), with wazero's own interruption
// instead ("wazero-interrupt": WithCloseOnContextDone, a call back into Go at
// every loop header, what the runtime used before), and without any
// ("uninterruptible": not safe for untrusted modules; shown only to measure
// the checks).
func BenchmarkWASMGuest(b *testing.B) {
	ctx := context.Background()
	orig, err := os.ReadFile(filepath.Join(wasmDir, "planner.wasm"))
	if err != nil {
		b.Fatal(err)
	}
	checked, err := interrupt.AddChecks(orig)
	if err != nil {
		b.Fatal(err)
	}
	input := benchInput(b)
	for _, tc := range []struct {
		name            string
		bin             []byte
		closeOnDeadline bool
	}{
		{"checks", checked, false},
		{"wazero-interrupt", orig, true},
		{"uninterruptible", orig, false},
	} {
		b.Run(tc.name, func(b *testing.B) {
			rt := wazero.NewRuntimeWithConfig(ctx, wazero.NewRuntimeConfig().WithCloseOnContextDone(tc.closeOnDeadline))
			defer rt.Close(ctx)
			wasi_snapshot_preview1.MustInstantiate(ctx, rt)
			// The slow deterministic clock the runtime gives guests: with
			// wazero's default a long run stops collecting garbage.
			var ticks int64
			cfg := wazero.NewModuleConfig().WithStartFunctions("_initialize").
				WithNanotime(func() int64 { ticks++; return ticks }, 1)
			mod, err := rt.InstantiateWithConfig(ctx, tc.bin, cfg)
			if err != nil {
				b.Fatal(err)
			}
			st := []uint64{uint64(len(input)), 0}
			if err := mod.ExportedFunction("registrum_alloc").CallWithStack(ctx, st); err != nil {
				b.Fatal(err)
			}
			ptr := uint32(st[0])
			plan := mod.ExportedFunction("registrum_plan")
			for b.Loop() {
				callCtx, cancel := context.WithTimeout(ctx, 10*time.Second)
				mod.Memory().Write(ptr, input)
				st[0], st[1] = uint64(ptr), uint64(len(input))
				if err := plan.CallWithStack(callCtx, st); err != nil {
					b.Fatal(err)
				}
				cancel()
			}
		})
	}
}

// BenchmarkInterruptRewrite measures the part of a WebAssembly load that adds
// the interrupt checks to the example planner (included in BenchmarkLoad).
func BenchmarkInterruptRewrite(b *testing.B) {
	bin, err := os.ReadFile(filepath.Join(wasmDir, "planner.wasm"))
	if err != nil {
		b.Fatal(err)
	}
	b.SetBytes(int64(len(bin)))
	for b.Loop() {
		if _, err := interrupt.AddChecks(bin); err != nil {
			b.Fatal(err)
		}
	}
}
