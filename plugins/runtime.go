package plugins

import (
	"context"
	"errors"
	"fmt"
	"runtime"
	"sort"

	"github.com/tetratelabs/wazero"
	"github.com/tetratelabs/wazero/imports/wasi_snapshot_preview1"

	"github.com/registrum/registrum/model"
	"github.com/registrum/registrum/plugins/contract"
)

// Config configures a Runtime.
type Config struct {
	// Limits bound every call; zero fields take their defaults.
	Limits Limits
	// CacheDir, when set, keeps compiled WebAssembly code on disk so the
	// next process loads modules without compiling them again. Empty keeps
	// the cache in memory for the Runtime's lifetime.
	CacheDir string
	// InstancePerCall makes every WebAssembly call run in a fresh instance,
	// so no state survives between calls, at the cost of instantiation
	// (milliseconds for a Go guest). By default instances are pooled and
	// reused; a failed call always discards its instance.
	InstancePerCall bool
	// PoolSize is the number of idle instances kept per WebAssembly module.
	// Default GOMAXPROCS.
	PoolSize int
}

// Runtime loads modules and owns the sandboxes they run in. It is safe for
// concurrent use. Close it to release compiled code.
type Runtime struct {
	cfg    Config
	limits Limits
	wasm   wazero.Runtime
	cache  wazero.CompilationCache
}

// NewRuntime returns a Runtime with the given configuration.
func NewRuntime(ctx context.Context, cfg Config) (*Runtime, error) {
	limits, err := cfg.Limits.withDefaults()
	if err != nil {
		return nil, err
	}
	if cfg.PoolSize <= 0 {
		cfg.PoolSize = runtime.GOMAXPROCS(0)
	}
	var cache wazero.CompilationCache
	if cfg.CacheDir != "" {
		if cache, err = wazero.NewCompilationCacheWithDir(cfg.CacheDir); err != nil {
			return nil, fmt.Errorf("plugins: compilation cache %s: %w", cfg.CacheDir, err)
		}
	} else {
		cache = wazero.NewCompilationCache()
	}
	// Calls are stopped at their wall-time limit by the interrupt checks
	// loadWASM adds to each module (see interrupt.go), not by wazero's
	// WithCloseOnContextDone, which costs a Go guest two to three times
	// its run time.
	rc := wazero.NewRuntimeConfig().
		WithMemoryLimitPages(limits.MemoryPages).
		WithCompilationCache(cache)
	wr := wazero.NewRuntimeWithConfig(ctx, rc)
	if _, err := wasi_snapshot_preview1.Instantiate(ctx, wr); err != nil {
		_ = wr.Close(ctx)
		return nil, fmt.Errorf("plugins: instantiate WASI: %w", err)
	}
	capTengoStrings()
	return &Runtime{cfg: cfg, limits: limits, wasm: wr, cache: cache}, nil
}

// Limits returns the limits in force, defaults applied.
func (r *Runtime) Limits() Limits { return r.limits }

// Close releases the runtime and every module loaded through it.
func (r *Runtime) Close(ctx context.Context) error {
	err := r.wasm.Close(ctx)
	if cerr := r.cache.Close(ctx); err == nil {
		err = cerr
	}
	return err
}

// program is one loaded module in its engine. call runs it on an input
// document and returns its raw output document; errors are *Failure.
type program interface {
	// call runs the module on input; parsed is input as values when
	// parsesInput reports that the engine uses them, else nil.
	call(ctx context.Context, kind model.ModuleKind, input []byte, parsed any) ([]byte, error)
	// parsesInput reports whether call needs the parsed input.
	parsesInput() bool
	close(ctx context.Context) error
}

// Set is the modules one Load pinned and compiled, ready to call. It is safe
// for concurrent use.
type Set struct {
	rt      *Runtime
	modules map[string]*loaded
}

type loaded struct {
	Module
	prog program
}

// Load checks every module (declaration, file, pinned digest, engine
// contract) and compiles it once. Paths are relative to baseDir. Any problem
// refuses the whole set; the error lists every module that failed.
func (r *Runtime) Load(ctx context.Context, modules []Module, baseDir string) (*Set, error) {
	s := &Set{rt: r, modules: make(map[string]*loaded, len(modules))}
	var errs []error
	for i, m := range modules {
		if err := m.check(); err != nil {
			errs = append(errs, fmt.Errorf("plugins: modules[%d] (%q): %w", i, m.ID, err))
			continue
		}
		if _, dup := s.modules[m.ID]; dup {
			errs = append(errs, fmt.Errorf("plugins: modules[%d]: id %q is used twice", i, m.ID))
			continue
		}
		prog, err := r.load(ctx, m, baseDir)
		if err != nil {
			errs = append(errs, fmt.Errorf("plugins: module %q: %w", m.ID, err))
			continue
		}
		s.modules[m.ID] = &loaded{Module: m, prog: prog}
	}
	if len(errs) > 0 {
		_ = s.Close(ctx)
		return nil, errors.Join(errs...)
	}
	return s, nil
}

func (r *Runtime) load(ctx context.Context, m Module, baseDir string) (program, error) {
	src, err := m.readPinned(baseDir)
	if err != nil {
		return nil, err
	}
	switch m.Engine {
	case model.EngineWASM:
		return r.loadWASM(ctx, m, src)
	default:
		return r.loadTengo(m, src)
	}
}

// Modules lists the loaded modules, sorted by id.
func (s *Set) Modules() []Module {
	out := make([]Module, 0, len(s.modules))
	for _, l := range s.modules {
		out = append(out, l.Module)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].ID < out[j].ID })
	return out
}

// Close releases the set's modules. Call it once its calls have returned.
func (s *Set) Close(ctx context.Context) error {
	var errs []error
	for _, l := range s.modules {
		errs = append(errs, l.prog.close(ctx))
	}
	return errors.Join(errs...)
}

// Plan runs planner moduleID on in and returns its validated plan or refusal.
func (s *Set) Plan(ctx context.Context, moduleID string, in contract.PlannerInput) (contract.PlanResult, error) {
	var out contract.PlanResult
	input, err := marshalInput("request", in.Request)
	if err != nil {
		return out, err
	}
	_, err = s.call(ctx, moduleID, model.KindPlanner, input, &out)
	return out, err
}

// HandleEvent runs hook handler moduleID on the exact captured event body.
func (s *Set) HandleEvent(ctx context.Context, moduleID string, envelope []byte) (contract.HookResult, error) {
	var out contract.HookResult
	_, err := s.call(ctx, moduleID, model.KindHookHandler, envelope, &out)
	return out, err
}

// ComputeAction runs action handler moduleID on an action's inputs.
func (s *Set) ComputeAction(ctx context.Context, moduleID string, in contract.ActionInput) (contract.ActionResult, error) {
	var out contract.ActionResult
	input, err := marshalInput("inputs", in.Inputs)
	if err != nil {
		return out, err
	}
	_, err = s.call(ctx, moduleID, model.KindActionHandler, input, &out)
	return out, err
}

// Call runs moduleID on a raw input document (the JSON form of the
// module's kind of input) and returns the validated output in canonical
// JSON (RFC 8785). It is what `registrum plugins run` uses.
func (s *Set) Call(ctx context.Context, moduleID string, input []byte) ([]byte, error) {
	l, ok := s.modules[moduleID]
	if !ok {
		return nil, fmt.Errorf("%w %q", ErrUnknownModule, moduleID)
	}
	var out any
	switch l.Kind {
	case model.KindPlanner:
		out = new(contract.PlanResult)
	case model.KindHookHandler:
		out = new(contract.HookResult)
	default:
		out = new(contract.ActionResult)
	}
	return s.call(ctx, moduleID, l.Kind, input, out)
}

func marshalInput(member string, fields map[string]any) ([]byte, error) {
	if fields == nil {
		fields = map[string]any{}
	}
	b, err := contract.AppendValue(nil, map[string]any{member: fields})
	if err != nil {
		return nil, fail(FailureRefused, fmt.Errorf("encode input: %w", err))
	}
	return b, nil
}

// call checks the input, runs the module, then decodes out strictly,
// validates it against the module's declarations and returns its canonical
// form.
func (s *Set) call(ctx context.Context, moduleID string, kind model.ModuleKind, input []byte, out any) ([]byte, error) {
	l, ok := s.modules[moduleID]
	if !ok {
		return nil, fmt.Errorf("%w %q", ErrUnknownModule, moduleID)
	}
	canon, err := s.run(ctx, l, kind, input, out)
	if f, ok := err.(*Failure); ok {
		f.Module = moduleID
	}
	return canon, err
}

func (s *Set) run(ctx context.Context, l *loaded, kind model.ModuleKind, input []byte, out any) ([]byte, error) {
	if l.Kind != kind {
		return nil, fail(FailureRefused, fmt.Errorf("module is a %s, called as a %s", l.Kind, kind))
	}
	if len(input) > s.rt.limits.MaxInputBytes {
		return nil, fail(FailureRefused, fmt.Errorf("input of %d bytes is over the %d-byte limit", len(input), s.rt.limits.MaxInputBytes))
	}
	var parsed any
	var err error
	if l.prog.parsesInput() || kind == model.KindHookHandler {
		parsed, err = checkInput(kind, input)
	} else {
		// Checked as strictly, without building values the engine would
		// not use.
		err = contract.CheckObjectMember(input, inputMember(kind))
		if err != nil {
			err = fmt.Errorf("input: %w", err)
		}
	}
	if err != nil {
		return nil, fail(FailureRefused, err)
	}
	raw, err := l.prog.call(ctx, kind, input, parsed)
	if err != nil {
		return nil, err
	}
	if len(raw) > s.rt.limits.MaxOutputBytes {
		return nil, fail(FailureInvalidOutput, fmt.Errorf("output of %d bytes is over the %d-byte limit", len(raw), s.rt.limits.MaxOutputBytes))
	}
	if err := decodeOutput(raw, out); err != nil {
		return nil, fail(FailureInvalidOutput, fmt.Errorf("decode output: %w", err))
	}
	switch o := out.(type) {
	case *contract.PlanResult:
		err = o.Validate(l.Writes)
	case *contract.HookResult:
		err = o.Validate()
	case *contract.ActionResult:
		err = o.Validate(l.ActionWrites, l.Refusals)
	}
	if err != nil {
		return nil, fail(FailureInvalidOutput, fmt.Errorf("output: %w", err))
	}
	canon, err := canonicalOutput(out)
	if err != nil {
		return nil, fail(FailureInvalidOutput, err)
	}
	return canon, nil
}

// inputMember is the one member of a planner's or action handler's input
// document, "" for a hook handler's.
func inputMember(kind model.ModuleKind) string {
	switch kind {
	case model.KindPlanner:
		return "request"
	case model.KindActionHandler:
		return "inputs"
	}
	return ""
}

// checkInput verifies the input document has its kind's shape: an object
// with only "request" (planner) or "inputs" (action handler) holding an
// object, or any JSON object (hook handler: the captured event body).
// It returns the parsed document.
func checkInput(kind model.ModuleKind, input []byte) (any, error) {
	v, err := contract.ParseValue(input)
	if err != nil {
		return nil, fmt.Errorf("input: %w", err)
	}
	obj, ok := v.(map[string]any)
	if !ok {
		return nil, errors.New("input: not a JSON object")
	}
	member := inputMember(kind)
	if member == "" {
		return obj, nil
	}
	if _, ok := obj[member].(map[string]any); !ok {
		return nil, fmt.Errorf("input.%s: missing or not an object", member)
	}
	if len(obj) != 1 {
		return nil, fmt.Errorf("input: only the member %q is allowed", member)
	}
	return obj, nil
}
