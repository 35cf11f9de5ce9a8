package plugins_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"testing"
	"time"

	"github.com/registrum/registrum/internal/testslack"
	"github.com/registrum/registrum/model"
	"github.com/registrum/registrum/plugins"
	"github.com/registrum/registrum/plugins/contract"
)

// hostile loads the hostile WebAssembly planner on a runtime with cfg.
func hostile(t testing.TB, cfg plugins.Config) *plugins.Set {
	t.Helper()
	rt := newRuntime(t, cfg)
	m, dir := pinned(t, "hostile", model.EngineWASM, model.KindPlanner, filepath.Join(wasmDir, "hostile.wasm"))
	return loadOne(t, rt, m, dir)
}

func attack(ctx context.Context, set *plugins.Set, id, name string) ([]byte, error) {
	return set.Call(ctx, id, []byte(`{"request":{"attack":"`+name+`"}}`))
}

// probeResult returns the "result" value a hostile probe reported.
func probeResult(t *testing.T, out []byte) string {
	t.Helper()
	var plan contract.PlanResult
	if err := json.Unmarshal(out, &plan); err != nil || len(plan.Effects) != 1 {
		t.Fatalf("probe output %s: %v", out, err)
	}
	var s string
	if err := json.Unmarshal(plan.Effects[0].Set["result"].Value, &s); err != nil {
		t.Fatal(err)
	}
	return s
}

// requireFailure checks err is a *Failure of kind want whose message holds
// no text from the module.
func requireFailure(t *testing.T, err error, want plugins.FailureKind) *plugins.Failure {
	t.Helper()
	var f *plugins.Failure
	if !errors.As(err, &f) {
		t.Fatalf("want a %s failure, got %v", want, err)
	}
	if f.Kind != want {
		t.Fatalf("want failure kind %s, got %s (detail: %v)", want, f.Kind, f.Detail())
	}
	if msg := err.Error(); msg != `plugins: module "`+f.Module+`" failed: `+string(want) {
		t.Fatalf("failure message carries more than id and kind: %q", msg)
	}
	return f
}

// TestWASMHostile runs each attack of the hostile module, then checks the
// module still answers a plain call (the host and the pool survived).
//
// Only the endless loop is a test of the wall-time limit, so only it runs
// under a short one. Every other attack runs under a wall-time limit far
// above what it needs, so that it fails with its own kind however slow the
// machine is: the memory attack grows and zeroes its memory page by page, and
// on a busy two-core machine that can take longer than any short limit.
func TestWASMHostile(t *testing.T) {
	const (
		wall     = 300 * time.Millisecond
		generous = 30 * time.Second
	)
	limits := plugins.Limits{MemoryPages: 256, MaxOutputBytes: 1 << 20}
	short, long := limits, limits
	short.WallTime, long.WallTime = wall, generous
	sets := map[time.Duration]*plugins.Set{
		wall:     hostile(t, plugins.Config{Limits: short}),
		generous: hostile(t, plugins.Config{Limits: long}),
	}
	ctx := context.Background()
	healthy := func(t *testing.T, set *plugins.Set) {
		t.Helper()
		out, err := attack(ctx, set, "hostile", "none")
		if err != nil || probeResult(t, out) != "ok" {
			t.Fatalf("module no longer answers after the attack: %s, %v", out, err)
		}
	}
	for _, tc := range []struct {
		attack string
		want   plugins.FailureKind
		wall   time.Duration
	}{
		{"loop", plugins.FailureTimeout, wall},
		{"memory", plugins.FailureMemory, generous},
		{"trap", plugins.FailureTrap, generous},
		{"exit", plugins.FailureTrap, generous},
		{"big", plugins.FailureInvalidOutput, generous},
		{"garbage", plugins.FailureInvalidOutput, generous},
		{"badptr", plugins.FailureInvalidOutput, generous},
	} {
		t.Run(tc.attack, func(t *testing.T) {
			set := sets[tc.wall]
			start := time.Now()
			_, err := attack(ctx, set, "hostile", tc.attack)
			took := time.Since(start)
			requireFailure(t, err, tc.want)
			if tc.want == plugins.FailureTimeout {
				if took < tc.wall {
					t.Fatalf("attack %s was stopped after %s, before its %s limit", tc.attack, took, tc.wall)
				}
				testslack.Stopped(t, "attack "+tc.attack, took, tc.wall)
			}
			healthy(t, set)
		})
	}
}

// TestWASMNoAmbientAuthority checks a module can read no file, list no
// folder, create no file, dial or listen on no socket, see no environment or
// arguments, and gets deterministic clock and random sources.
func TestWASMNoAmbientAuthority(t *testing.T) {
	t.Setenv("REGISTRUM_TEST_SECRET", "do-not-leak")
	set := hostile(t, plugins.Config{InstancePerCall: true})
	ctx := context.Background()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	accepted := make(chan struct{}, 1)
	go func() {
		if c, err := ln.Accept(); err == nil {
			c.Close()
			accepted <- struct{}{}
		}
	}()
	for attackName, want := range map[string]string{
		"file":    "file:",
		"network": "network:",
		"env":     "env:0:",
	} {
		out, err := set.Call(ctx, "hostile", []byte(`{"request":{"attack":"`+attackName+`","target":"`+ln.Addr().String()+`"}}`))
		if err != nil {
			t.Fatalf("%s: %v (%v)", attackName, err, detail(err))
		}
		if got := probeResult(t, out); got != want {
			t.Errorf("%s: the module reported %q, want %q (nothing reachable)", attackName, got, want)
		}
	}
	select {
	case <-accepted:
		t.Fatal("the module reached a host socket")
	default:
	}
	if _, err := os.Stat("/tmp/registrum-hostile"); err == nil {
		t.Fatal("the module created a file on the host")
	}
	// Two fresh instances see the same clock and the same "random" bytes.
	a, err := attack(ctx, set, "hostile", "clock")
	if err != nil {
		t.Fatal(err)
	}
	b, err := attack(ctx, set, "hostile", "clock")
	if err != nil {
		t.Fatal(err)
	}
	if probeResult(t, a) != probeResult(t, b) {
		t.Fatalf("clock and random are not deterministic: %s vs %s", a, b)
	}
	if y := time.Now().Year(); strings.Contains(probeResult(t, a), ":"+itoa(y)+":") {
		t.Fatalf("the module sees the real clock: %s", a)
	}
}

func itoa(n int) string { b, _ := json.Marshal(n); return string(b) }

// TestWASMInstanceIsolation checks the pool reuses warm instances while
// InstancePerCall gives every call a fresh one.
func TestWASMInstanceIsolation(t *testing.T) {
	ctx := context.Background()
	fresh := hostile(t, plugins.Config{InstancePerCall: true})
	for range 3 {
		out, err := attack(ctx, fresh, "hostile", "state")
		if err != nil || probeResult(t, out) != "state:1" {
			t.Fatalf("instance per call kept state: %s %v", out, err)
		}
	}
	pooled := hostile(t, plugins.Config{PoolSize: 1})
	var last string
	for range 3 {
		out, err := attack(ctx, pooled, "hostile", "state")
		if err != nil {
			t.Fatal(err)
		}
		last = probeResult(t, out)
	}
	if last != "state:3" {
		t.Fatalf("pooled instance was not reused: %s", last)
	}
}

// TestWASMLimitsAtTheirEdges checks input and output byte limits: exactly at
// the limit passes, one byte over fails, and a refused input never reaches
// the module.
func TestWASMLimitsAtTheirEdges(t *testing.T) {
	ctx := context.Background()
	okOutput := `{"effects":[{"id":"probe","operation":"create","target":{"entity":"probe"},"set":{"result":{"value":"ok"}}}]}`
	input := []byte(`{"request":{"attack":"none"}}`)

	exact := hostile(t, plugins.Config{Limits: plugins.Limits{MaxInputBytes: len(input), MaxOutputBytes: len(okOutput)}})
	if _, err := exact.Call(ctx, "hostile", input); err != nil {
		t.Fatalf("input and output exactly at their limits: %v (%v)", err, detail(err))
	}
	smallIn := hostile(t, plugins.Config{Limits: plugins.Limits{MaxInputBytes: len(input) - 1}})
	_, err := smallIn.Call(ctx, "hostile", input)
	requireFailure(t, err, plugins.FailureRefused)
	smallOut := hostile(t, plugins.Config{Limits: plugins.Limits{MaxOutputBytes: len(okOutput) - 1}})
	_, err = smallOut.Call(ctx, "hostile", input)
	requireFailure(t, err, plugins.FailureInvalidOutput)
}

// TestWASMMemoryLimitAtLoad checks a module whose initial memory does not
// fit the page limit is refused when loaded, not at its first call.
func TestWASMMemoryLimitAtLoad(t *testing.T) {
	rt := newRuntime(t, plugins.Config{Limits: plugins.Limits{MemoryPages: 16}})
	m, dir := pinned(t, "hostile", model.EngineWASM, model.KindPlanner, filepath.Join(wasmDir, "hostile.wasm"))
	_, err := rt.Load(context.Background(), []plugins.Module{m}, dir)
	if err == nil || !strings.Contains(err.Error(), `module "hostile"`) || strings.Contains(err.Error(), `module ""`) {
		t.Fatalf("want a load error naming the module, got %v", err)
	}
}

// TestCancelledCallIsNotAFailure checks a caller's own cancellation is
// reported as such, not blamed on the module.
func TestCancelledCallIsNotAFailure(t *testing.T) {
	set := hostile(t, plugins.Config{Limits: plugins.Limits{WallTime: 5 * time.Second}})
	ctx, cancel := context.WithCancel(context.Background())
	time.AfterFunc(50*time.Millisecond, cancel)
	_, err := attack(ctx, set, "hostile", "loop")
	if !errors.Is(err, context.Canceled) || plugins.FailureKindOf(err) != "" {
		t.Fatalf("want context.Canceled and no failure kind, got %v", err)
	}
}

// TestWASMLoopStopsDuringGC checks an endless guest loop is stopped at its
// limit while the host collects garbage without pause, on one and on two
// processors: compiled guest code must give the Go scheduler a chance to
// stop its goroutine, or a collection waits for the loop and the timer that
// stops it never runs.
func TestWASMLoopStopsDuringGC(t *testing.T) {
	const wall = 200 * time.Millisecond
	for _, procs := range []int{1, 2} {
		t.Run(fmt.Sprintf("GOMAXPROCS=%d", procs), func(t *testing.T) {
			defer runtime.GOMAXPROCS(runtime.GOMAXPROCS(procs))
			set := hostile(t, plugins.Config{Limits: plugins.Limits{WallTime: wall}})
			stop := make(chan struct{})
			done := make(chan struct{})
			go func() {
				defer close(done)
				for {
					select {
					case <-stop:
						return
					default:
						runtime.GC()
					}
				}
			}()
			defer func() { close(stop); <-done }()
			for range 3 {
				// A plain call first, so the loop runs in a warm instance
				// (the previous one was discarded) and the time below is
				// the loop's alone.
				if _, err := attack(context.Background(), set, "hostile", "none"); err != nil {
					t.Fatal(err)
				}
				// Without preemption points in guest code the loop is
				// never stopped (the collection waits for it), so any
				// finite bound catches that; the timeout kind shows the
				// limit, not something else, ended it.
				start := time.Now()
				_, err := attack(context.Background(), set, "hostile", "loop")
				requireFailure(t, err, plugins.FailureTimeout)
				testslack.Stopped(t, "the loop", time.Since(start), wall)
			}
		})
	}
}

// TestWASMGarbageIsCollected checks a pooled instance keeps collecting its
// garbage call after call. The guest's deterministic clock must advance
// slowly: with wazero's default (1 ms a reading) the Go runtime's collector
// stops once about two seconds of guest time have passed (some 65,000
// planner calls, or a few calls that each make 64 MiB of garbage), and the
// instance then fails with "memory".
func TestWASMGarbageIsCollected(t *testing.T) {
	set := hostile(t, plugins.Config{PoolSize: 1, Limits: plugins.Limits{WallTime: 10 * time.Second}})
	for i := range 40 {
		out, err := attack(context.Background(), set, "hostile", "churn")
		if err != nil {
			t.Fatalf("call %d: %v (%v)", i, err, detail(err))
		}
		if got := probeResult(t, out); got != "ok" {
			t.Fatalf("call %d: %s", i, got)
		}
	}
}

// TestWASMInputIsCheckedLikeTengos checks a WebAssembly module's input,
// passed on as bytes, is refused exactly where a script's parsed input is.
func TestWASMInputIsCheckedLikeTengos(t *testing.T) {
	ctx := context.Background()
	set := hostile(t, plugins.Config{})
	for _, in := range []string{`not json`, `[]`, `{"request":[]}`, `{"request":{},"caller":"x"}`, `{}`, `{"request":{}} {}`,
		"{\"request\":{\"attack\":\"none\",\"x\":\"\xff\"}}", "{\"request\":{\"attack\":\"none\",\"x\":\"\x01\"}}",
		`{"request":{"attack":"none","x":"\q"}}`, `{"request":{"attack":"none"},"request":1}`} {
		if _, err := set.Call(ctx, "hostile", []byte(in)); plugins.FailureKindOf(err) != plugins.FailureRefused {
			t.Errorf("input %q: want refused, got %v", in, err)
		}
	}
	if _, err := set.Call(ctx, "hostile", []byte(`{"request":1,"request":{"attack":"none"}}`)); plugins.FailureKindOf(err) != plugins.FailureRefused {
		t.Errorf("a repeated request member: want refused, got %v", err)
	}
}
