package plugins

import (
	"bytes"
	"context"
	"crypto/rand"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"

	"github.com/tetratelabs/wazero"
	"github.com/tetratelabs/wazero/api"
	"github.com/tetratelabs/wazero/sys"

	"github.com/registrum/registrum/model"
	"github.com/registrum/registrum/plugins/internal/interrupt"
)

// The guest ABI, version 1. A module exports its linear memory and:
//
//	registrum_abi_version() -> i32                returns 1
//	registrum_kinds() -> i32                      handlers registered: 1 planner, 2 hook handler, 4 action handler
//	registrum_alloc(size i32) -> i32              an input buffer of size bytes, kept by the guest until freed
//	registrum_free(ptr i32)                       releases an input buffer
//	registrum_plan(ptr, len i32) -> i64           planner
//	registrum_handle_event(ptr, len i32) -> i64   hook handler
//	registrum_compute_action(ptr, len i32) -> i64 action handler
//
// The host allocates one input buffer per instance and reuses it for every
// call, allocating a larger one (and freeing the old) only when an input does
// not fit. An entry point reads its input from the buffer and returns
// outPtr<<32 | outLen; the output stays valid until the next call into the
// instance, and the host copies it. A call is thus a single guest call in
// the steady state. Package sdk/guest implements this.
const (
	abiVersion       = 1
	exportABIVersion = "registrum_abi_version"
	exportKinds      = "registrum_kinds"
	exportAlloc      = "registrum_alloc"
	exportFree       = "registrum_free"
	wasiModule       = "wasi_snapshot_preview1"
)

// kindBit returns the bit registrum_kinds sets for a module of kind k.
func kindBit(k model.ModuleKind) uint64 {
	switch k {
	case model.KindPlanner:
		return 1
	case model.KindHookHandler:
		return 2
	default:
		return 4
	}
}

// entryPoint returns the export that runs a module of kind k.
func entryPoint(k model.ModuleKind) string {
	switch k {
	case model.KindPlanner:
		return "registrum_plan"
	case model.KindHookHandler:
		return "registrum_handle_event"
	default:
		return "registrum_compute_action"
	}
}

type wasmProgram struct {
	rt       *Runtime
	compiled wazero.CompiledModule
	entry    string
	kind     model.ModuleKind
	module   Module
	pool     chan *wasmInstance
	closed   sync.Once
}

type wasmInstance struct {
	mod                api.Module
	alloc, free, entry api.Function
	stderr             *limitedBuffer
	stack              []uint64
	// flag is the module's interrupt flag; interrupt sets it, which traps
	// the guest at its next loop iteration or function call.
	flag      api.MutableGlobal
	interrupt func()
	// buf and bufCap locate the guest's input buffer.
	buf, bufCap uint32
}

// initialInputBuffer is the size of the input buffer allocated with each
// instance; most inputs fit in it.
const initialInputBuffer = 64 << 10

func (r *Runtime) loadWASM(ctx context.Context, m Module, src []byte) (program, error) {
	// src is the reviewed module, its digest already checked; what runs is
	// that module with interrupt checks added.
	code, err := interrupt.AddChecks(src)
	if err != nil {
		return nil, fmt.Errorf("compile WebAssembly: add interrupt checks: %w", err)
	}
	compiled, err := r.wasm.CompileModule(ctx, code)
	if err != nil {
		return nil, fmt.Errorf("compile WebAssembly: %w", err)
	}
	p := &wasmProgram{rt: r, compiled: compiled, entry: entryPoint(m.Kind), kind: m.Kind, module: m}
	if err := p.checkInterface(); err != nil {
		_ = compiled.Close(ctx)
		return nil, err
	}
	p.pool = make(chan *wasmInstance, r.cfg.PoolSize)
	// Instantiate once now: this runs the guest's initialisation under the
	// limits, checks the ABI version, and warms the pool.
	inst, err := p.instantiate(ctx)
	if err != nil {
		_ = compiled.Close(ctx)
		var f *Failure
		if errors.As(err, &f) {
			return nil, fmt.Errorf("instantiate: %s: %w", f.Kind, f.Detail())
		}
		return nil, fmt.Errorf("instantiate: %w", err)
	}
	p.put(ctx, inst)
	return p, nil
}

// buildReactor says how to build a Go plugin as a reactor module.
const buildReactor = "build it with GOOS=wasip1 GOARCH=wasm go build -buildmode=c-shared"

// checkInterface refuses a module that imports anything but WASI or lacks an
// export of the ABI its kind needs.
func (p *wasmProgram) checkInterface() error {
	for _, f := range p.compiled.ImportedFunctions() {
		mod, name, _ := f.Import()
		if mod != wasiModule {
			return fmt.Errorf("imports %s.%s: a module may import only %s", mod, name, wasiModule)
		}
	}
	exports := p.compiled.ExportedFunctions()
	_, command := exports["_start"]
	if _, reactor := exports["_initialize"]; command && !reactor {
		// A command module's exports run before its runtime is set up: the
		// first call would trap in the guest's runtime.
		return fmt.Errorf("is built in command mode (it exports _start): a plugin must be a reactor module; %s", buildReactor)
	}
	for _, name := range []string{exportABIVersion, exportKinds, exportAlloc, exportFree, p.entry} {
		if _, ok := exports[name]; !ok {
			return fmt.Errorf("does not export %s: build it with sdk/guest as a reactor module; %s", name, buildReactor)
		}
	}
	if _, ok := p.compiled.ExportedMemories()["memory"]; !ok {
		return errors.New("does not export its memory")
	}
	return nil
}

func (p *wasmProgram) instantiate(ctx context.Context) (*wasmInstance, error) {
	ctx, cancel := context.WithTimeout(ctx, p.rt.limits.InitTime)
	defer cancel()
	stderr := &limitedBuffer{max: 4096}
	// No filesystem, environment, arguments, network or real clocks: the
	// module config grants nothing beyond the deterministic defaults and the
	// module's capabilities. Sleep stays a no-op in every case.
	// The start function (_initialize, for a Go reactor) is called below,
	// once the interrupt is armed.
	cfg := wazero.NewModuleConfig().
		WithName("").
		WithStartFunctions().
		WithStderr(stderr)
	if p.module.has(model.CapabilityClock) {
		cfg = cfg.WithSysWalltime().WithSysNanotime()
	} else {
		cfg = cfg.WithNanotime(slowFakeNanotime(), 1)
	}
	if p.module.has(model.CapabilityRandom) {
		cfg = cfg.WithRandSource(rand.Reader)
	}
	mod, err := p.rt.wasm.InstantiateModule(ctx, p.compiled, cfg)
	if err != nil {
		return nil, classifyWASM(ctx, err, nil, stderr, p.rt.limits)
	}
	flag, ok := mod.ExportedGlobal(interrupt.Export).(api.MutableGlobal)
	if !ok {
		_ = mod.Close(context.Background())
		return nil, fmt.Errorf("the module has no %s flag", interrupt.Export)
	}
	inst := &wasmInstance{
		mod:    mod,
		alloc:  mod.ExportedFunction(exportAlloc),
		free:   mod.ExportedFunction(exportFree),
		entry:  mod.ExportedFunction(p.entry),
		stderr: stderr,
		stack:  make([]uint64, 2),
		flag:   flag,
	}
	inst.interrupt = func() { flag.Set(1) }
	disarm := context.AfterFunc(ctx, inst.interrupt)
	err = p.initialize(ctx, inst)
	if !disarm() && err == nil {
		// The limit passed as initialisation returned: the flag is set.
		err = fmt.Errorf("initialisation: %w", ctx.Err())
	}
	if err != nil {
		_ = mod.Close(context.Background())
		var f *Failure
		if errors.As(err, &f) {
			return nil, f
		}
		return nil, classifyWASM(ctx, err, mod, stderr, p.rt.limits)
	}
	return inst, nil
}

// initialize runs a new instance's start function, checks its ABI version
// and kinds, and allocates its input buffer.
func (p *wasmProgram) initialize(ctx context.Context, inst *wasmInstance) error {
	if start := inst.mod.ExportedFunction("_initialize"); start != nil {
		if _, err := start.Call(ctx); err != nil {
			return err
		}
	}
	res, err := inst.mod.ExportedFunction(exportABIVersion).Call(ctx)
	if err != nil {
		return err
	}
	if len(res) != 1 || res[0] != abiVersion {
		return fmt.Errorf("guest ABI version %v, host speaks %d", res, abiVersion)
	}
	res, err = inst.mod.ExportedFunction(exportKinds).Call(ctx)
	if err != nil {
		return err
	}
	if len(res) != 1 || res[0]&kindBit(p.kind) == 0 {
		return fmt.Errorf("the module registers no %s handler", p.kind)
	}
	return inst.grow(ctx, initialInputBuffer)
}

// slowFakeNanotime returns a deterministic monotonic clock for one instance
// that advances one nanosecond per reading. With wazero's default fake clock
// (a millisecond per reading) a pooled Go guest stops collecting garbage once
// about two seconds of its clock have passed (measured: some 65,000 calls of
// the example planner, half as many at two milliseconds per reading, never
// with the real clock); its heap then grows to the page limit and the call
// fails with "memory". The Go runtime reads its clock in every collection,
// and the likely cause is its GC CPU limiter, which judges the collector to
// be using too much CPU and stops the allocation assists that, in a guest
// entered only through its exports, are what finish a collection. At a
// nanosecond per reading that point is a million times further away.
func slowFakeNanotime() func() int64 {
	var ticks atomic.Int64
	return func() int64 { return ticks.Add(1) }
}

func (p *wasmProgram) get(ctx context.Context) (*wasmInstance, error) {
	if !p.rt.cfg.InstancePerCall {
		select {
		case inst := <-p.pool:
			return inst, nil
		default:
		}
	}
	return p.instantiate(ctx)
}

func (p *wasmProgram) put(ctx context.Context, inst *wasmInstance) {
	if !p.rt.cfg.InstancePerCall {
		select {
		case p.pool <- inst:
			return
		default:
		}
	}
	_ = inst.mod.Close(ctx)
}

func (p *wasmProgram) call(ctx context.Context, _ model.ModuleKind, input []byte, _ any) ([]byte, error) {
	inst, err := p.get(ctx)
	if err != nil {
		return nil, err
	}
	callCtx, cancel := context.WithTimeout(ctx, p.rt.limits.WallTime)
	defer cancel()
	disarm := context.AfterFunc(callCtx, inst.interrupt)
	out, err := inst.invoke(callCtx, input, p.rt.limits.MaxOutputBytes)
	armed := disarm()
	if err != nil || !armed {
		// A failed instance may be closed, half-way through its heap, or
		// hold a pinned output; an instance whose call met its limit as it
		// returned has (or is about to have) its interrupt flag set:
		// never reuse either.
		_ = inst.mod.Close(context.Background())
		if err == nil {
			return out, nil
		}
		var f *Failure
		if errors.As(err, &f) {
			return nil, f
		}
		return nil, classifyWASM(callCtx, err, inst.mod, inst.stderr, p.rt.limits)
	}
	p.put(ctx, inst)
	return out, nil
}

// grow gives the instance an input buffer of at least size bytes.
func (inst *wasmInstance) grow(ctx context.Context, size uint32) error {
	st := inst.stack
	st[0] = uint64(size)
	if err := inst.alloc.CallWithStack(ctx, st); err != nil {
		return err
	}
	ptr := uint32(st[0])
	if _, ok := inst.mod.Memory().Read(ptr, size); !ok {
		return fail(FailureInvalidOutput, fmt.Errorf("alloc returned %#x, outside memory for %d bytes", ptr, size))
	}
	if inst.bufCap > 0 {
		st[0] = uint64(inst.buf)
		if err := inst.free.CallWithStack(ctx, st); err != nil {
			return err
		}
	}
	inst.buf, inst.bufCap = ptr, size
	return nil
}

// invoke passes input through the guest's memory and returns a copy of its
// output.
func (inst *wasmInstance) invoke(ctx context.Context, input []byte, maxOut int) ([]byte, error) {
	inst.stderr.Reset()
	if uint64(len(input)) > uint64(inst.bufCap) {
		if err := inst.grow(ctx, uint32(len(input))); err != nil {
			return nil, err
		}
	}
	mem := inst.mod.Memory()
	if !mem.Write(inst.buf, input) {
		return nil, fail(FailureInvalidOutput, fmt.Errorf("input buffer %#x is outside memory for %d bytes", inst.buf, len(input)))
	}
	st := inst.stack
	st[0], st[1] = uint64(inst.buf), uint64(len(input))
	if err := inst.entry.CallWithStack(ctx, st); err != nil {
		return nil, err
	}
	outPtr, outLen := uint32(st[0]>>32), uint32(st[0])
	if int64(outLen) > int64(maxOut) {
		return nil, fail(FailureInvalidOutput, fmt.Errorf("output of %d bytes is over the %d-byte limit", outLen, maxOut))
	}
	view, ok := mem.Read(outPtr, outLen)
	if !ok {
		return nil, fail(FailureInvalidOutput, fmt.Errorf("output at %#x+%d is outside memory", outPtr, outLen))
	}
	// The view is only valid until the next memory.grow: copy it.
	return bytes.Clone(view), nil
}

// classifyWASM turns an instantiation or call error into a Failure. A Go
// guest that cannot grow its heap prints "out of memory" and exits; a guest
// whose memory is at the page limit when it traps is also counted as memory.
func classifyWASM(ctx context.Context, err error, mod api.Module, stderr *limitedBuffer, l Limits) error {
	if ctxErr := ctx.Err(); ctxErr != nil {
		if errors.Is(ctxErr, context.DeadlineExceeded) {
			return fail(FailureTimeout, fmt.Errorf("stopped after the %s wall-time limit: %w", l.WallTime, err))
		}
		return fmt.Errorf("plugins: call cancelled: %w", ctxErr)
	}
	var exit *sys.ExitError
	if errors.As(err, &exit) && exit.ExitCode() == sys.ExitCodeDeadlineExceeded {
		return fail(FailureTimeout, err)
	}
	if bytes.Contains(stderr.Bytes(), []byte("out of memory")) {
		return fail(FailureMemory, fmt.Errorf("out of memory at the %d-page limit: %w", l.MemoryPages, err))
	}
	if mod != nil && mod.Memory() != nil {
		// Within one Go heap arena (4 MiB) of the limit.
		const arenaPages = 64
		if size := mod.Memory().Size() / 65536; size+arenaPages > l.MemoryPages {
			return fail(FailureMemory, fmt.Errorf("trapped with %d of %d pages in use: %w", size, l.MemoryPages, err))
		}
	}
	return fail(FailureTrap, err)
}

// parsesInput is false: a module receives the input's bytes.
func (p *wasmProgram) parsesInput() bool { return false }

func (p *wasmProgram) close(ctx context.Context) error {
	var err error
	p.closed.Do(func() {
		for {
			select {
			case inst := <-p.pool:
				_ = inst.mod.Close(ctx)
				continue
			default:
			}
			break
		}
		err = p.compiled.Close(ctx)
	})
	return err
}

// limitedBuffer keeps the first max bytes written to it and drops the rest.
type limitedBuffer struct {
	mu  sync.Mutex
	max int
	buf []byte
}

// Write keeps what fits under max and reports every byte written.
func (b *limitedBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	if room := b.max - len(b.buf); room > 0 {
		b.buf = append(b.buf, p[:min(room, len(p))]...)
	}
	return len(p), nil
}

// Bytes returns a copy of what was kept.
func (b *limitedBuffer) Bytes() []byte {
	b.mu.Lock()
	defer b.mu.Unlock()
	return bytes.Clone(b.buf)
}

// Reset forgets what was kept.
func (b *limitedBuffer) Reset() {
	b.mu.Lock()
	b.buf = b.buf[:0]
	b.mu.Unlock()
}
