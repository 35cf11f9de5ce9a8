package plugins

import (
	"context"
	"crypto/rand"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"strconv"
	"sync"
	"time"
	"unicode/utf8"

	"github.com/d5/tengo/v2"
	"github.com/d5/tengo/v2/parser"
	"github.com/d5/tengo/v2/stdlib"

	"github.com/registrum/registrum/model"
	"github.com/registrum/registrum/plugins/contract"
)

// tengoModules are the standard modules a script may import: pure functions
// only. Left out: os (files, processes, environment), fmt (prints to the
// host's stdout), times (real clock, and sleep ignores cancellation) and
// rand (not deterministic).
var tengoModules = []string{"math", "text", "json", "base64", "hex", "enum"}

// maxScriptBytes bounds a script's source.
const maxScriptBytes = 256 << 10

// MaxScriptStringBytes caps every string and byte slice a tengo script
// makes. MaxAllocs counts objects, not bytes, so without it a script could
// build one enormous string. tengo keeps this ceiling in process-wide
// variables, set when the first Runtime is made.
const MaxScriptStringBytes = 1 << 20

var tengoCapOnce sync.Once

func capTengoStrings() {
	tengoCapOnce.Do(func() {
		tengo.MaxStringLen = MaxScriptStringBytes
		tengo.MaxBytesLen = MaxScriptStringBytes
	})
}

// tengoProgram is a compiled script and a pool of virtual machines that
// run it. Reusing a machine saves allocating and clearing its stack and
// frames (about 80 KiB) on every call.
type tengoProgram struct {
	rt       *Runtime
	bytecode *tengo.Bytecode
	// globals is the pristine global slice: every run starts from a copy,
	// so nothing a run leaves in a global reaches the next one.
	globals             []tengo.Object
	inputIdx, outputIdx int
	vms                 chan *tengoVM
}

type tengoVM struct {
	vm      *tengo.VM
	globals []tengo.Object
}

// loadTengo compiles a script once. The script reads the global `input` (the
// input document) and assigns the global `output`; `has(map, key)` tells an
// explicit null member from an absent one.
func (r *Runtime) loadTengo(m Module, src []byte) (program, error) {
	if len(src) > maxScriptBytes {
		return nil, fmt.Errorf("script of %d bytes is over the %d-byte limit", len(src), maxScriptBytes)
	}
	if !utf8.Valid(src) {
		return nil, errors.New("script is not UTF-8")
	}
	imports := stdlib.GetModuleMap(tengoModules...)
	if m.has(model.CapabilityClock) {
		imports.AddBuiltinModule("clock", map[string]tengo.Object{"now_unix_ms": tengoNowUnixMS})
	}
	if m.has(model.CapabilityRandom) {
		imports.AddBuiltinModule("random", map[string]tengo.Object{"bytes": tengoRandomBytes})
	}

	symbols := tengo.NewSymbolTable()
	for i, fn := range tengo.GetAllBuiltinFunctions() {
		symbols.DefineBuiltin(i, fn.Name)
	}
	globals := make([]tengo.Object, tengo.GlobalsSize)
	input := symbols.Define("input")
	output := symbols.Define("output")
	has := symbols.Define("has")
	globals[input.Index] = tengo.UndefinedValue
	globals[output.Index] = tengo.UndefinedValue
	globals[has.Index] = tengoHas

	fileSet := parser.NewFileSet()
	file := fileSet.AddFile("(script)", -1, len(src))
	parsed, err := parser.NewParser(file, src, nil).ParseFile()
	if err != nil {
		return nil, fmt.Errorf("compile tengo script: %w", err)
	}
	c := tengo.NewCompiler(file, symbols, nil, imports, nil)
	if err := c.Compile(parsed); err != nil {
		return nil, fmt.Errorf("compile tengo script: %w", err)
	}
	bytecode := c.Bytecode()
	bytecode.RemoveDuplicates()
	return &tengoProgram{
		rt:        r,
		bytecode:  bytecode,
		globals:   globals[:symbols.MaxSymbols()+1],
		inputIdx:  input.Index,
		outputIdx: output.Index,
		vms:       make(chan *tengoVM, r.cfg.PoolSize),
	}, nil
}

func (p *tengoProgram) getVM() *tengoVM {
	select {
	case m := <-p.vms:
		return m
	default:
	}
	globals := make([]tengo.Object, len(p.globals))
	return &tengoVM{vm: tengo.NewVM(p.bytecode, globals, p.rt.limits.MaxAllocs), globals: globals}
}

func (p *tengoProgram) putVM(m *tengoVM) {
	select {
	case p.vms <- m:
	default:
	}
}

func (p *tengoProgram) call(ctx context.Context, _ model.ModuleKind, _ []byte, parsed any) ([]byte, error) {
	in, err := toTengo(parsed)
	if err != nil {
		return nil, fail(FailureRefused, err)
	}
	m := p.getVM()
	copy(m.globals, p.globals)
	m.globals[p.inputIdx] = in

	callCtx, cancel := context.WithTimeout(ctx, p.rt.limits.WallTime)
	defer cancel()
	// Abort the machine when the deadline passes: the interpreter checks
	// the flag between instructions.
	stop := context.AfterFunc(callCtx, m.vm.Abort)
	err = runVM(m.vm)
	if stop() {
		// The abort never fired: the machine is clean for the next call.
		defer p.putVM(m)
	}
	if ctxErr := callCtx.Err(); ctxErr != nil {
		if errors.Is(ctxErr, context.DeadlineExceeded) {
			return nil, fail(FailureTimeout, fmt.Errorf("stopped after the %s wall-time limit", p.rt.limits.WallTime))
		}
		return nil, fmt.Errorf("plugins: call cancelled: %w", ctxErr)
	}
	if err != nil {
		switch {
		case errors.Is(err, tengo.ErrObjectAllocLimit), errors.Is(err, tengo.ErrStringLimit), errors.Is(err, tengo.ErrBytesLimit):
			return nil, fail(FailureMemory, err)
		default:
			return nil, fail(FailureTrap, err)
		}
	}
	w := jsonWriter{max: p.rt.limits.MaxOutputBytes}
	err = w.value(m.globals[p.outputIdx], 0)
	clear(m.globals) // drop references to this call's objects
	if err != nil {
		return nil, fail(FailureInvalidOutput, fmt.Errorf("output: %w", err))
	}
	return w.buf, nil
}

// runVM runs a machine, turning an interpreter panic into an error.
func runVM(vm *tengo.VM) (err error) {
	defer func() {
		if r := recover(); r != nil {
			err = fmt.Errorf("interpreter panic: %v", r)
		}
	}()
	return vm.Run()
}

func (p *tengoProgram) close(context.Context) error { return nil }

// parsesInput is true: a script receives the input as values.
func (p *tengoProgram) parsesInput() bool { return true }

var tengoNowUnixMS = &tengo.UserFunction{Name: "now_unix_ms", Value: func(args ...tengo.Object) (tengo.Object, error) {
	if len(args) != 0 {
		return nil, tengo.ErrWrongNumArguments
	}
	return &tengo.Int{Value: time.Now().UnixMilli()}, nil
}}

// maxRandomBytes bounds one random.bytes(n) call.
const maxRandomBytes = 1024

var tengoRandomBytes = &tengo.UserFunction{Name: "bytes", Value: func(args ...tengo.Object) (tengo.Object, error) {
	if len(args) != 1 {
		return nil, tengo.ErrWrongNumArguments
	}
	n, ok := tengo.ToInt(args[0])
	if !ok || n < 0 || n > maxRandomBytes {
		return nil, tengo.ErrInvalidArgumentType{Name: "n", Expected: "int from 0 to 1024", Found: args[0].TypeName()}
	}
	b := make([]byte, n)
	if _, err := rand.Read(b); err != nil {
		return nil, err
	}
	return &tengo.Bytes{Value: b}, nil
}}

var tengoHas = &tengo.UserFunction{Name: "has", Value: func(args ...tengo.Object) (tengo.Object, error) {
	if len(args) != 2 {
		return nil, tengo.ErrWrongNumArguments
	}
	key, ok := tengo.ToString(args[1])
	if !ok {
		return nil, tengo.ErrInvalidArgumentType{Name: "key", Expected: "string", Found: args[1].TypeName()}
	}
	var found bool
	switch m := args[0].(type) {
	case *tengo.Map:
		_, found = m.Value[key]
	case *tengo.ImmutableMap:
		_, found = m.Value[key]
	default:
		return nil, tengo.ErrInvalidArgumentType{Name: "map", Expected: "map", Found: args[0].TypeName()}
	}
	if found {
		return tengo.TrueValue, nil
	}
	return tengo.FalseValue, nil
}}

// toTengo converts a value from contract.ParseValue to a tengo object. A
// null becomes undefined; an integral number that fits int64 becomes an Int,
// any other number a Float.
func toTengo(v any) (tengo.Object, error) {
	switch x := v.(type) {
	case nil:
		return tengo.UndefinedValue, nil
	case bool:
		if x {
			return tengo.TrueValue, nil
		}
		return tengo.FalseValue, nil
	case string:
		return &tengo.String{Value: x}, nil
	case json.Number:
		if i, err := strconv.ParseInt(string(x), 10, 64); err == nil {
			return &tengo.Int{Value: i}, nil
		}
		f, err := strconv.ParseFloat(string(x), 64)
		if err != nil {
			return nil, fmt.Errorf("number %s: %w", x, err)
		}
		return &tengo.Float{Value: f}, nil
	case []any:
		arr := make([]tengo.Object, len(x))
		for i, e := range x {
			o, err := toTengo(e)
			if err != nil {
				return nil, err
			}
			arr[i] = o
		}
		return &tengo.Array{Value: arr}, nil
	case map[string]any:
		m := make(map[string]tengo.Object, len(x))
		for k, e := range x {
			o, err := toTengo(e)
			if err != nil {
				return nil, err
			}
			m[k] = o
		}
		return &tengo.Map{Value: m}, nil
	default:
		return nil, fmt.Errorf("cannot pass a %T to a script", v)
	}
}

// jsonWriter encodes a script's output object as JSON, stopping as soon as
// the output passes max bytes, so a script cannot make the host buffer more
// than its limit.
type jsonWriter struct {
	buf []byte
	max int
}

var errTooLarge = errors.New("over the output byte limit")

func (w *jsonWriter) value(o tengo.Object, depth int) error {
	if len(w.buf) > w.max {
		return fmt.Errorf("%w of %d bytes", errTooLarge, w.max)
	}
	if depth > contract.MaxDepth {
		return errors.New("nested too deeply")
	}
	switch x := o.(type) {
	case *tengo.Undefined:
		w.buf = append(w.buf, "null"...)
	case *tengo.Bool:
		w.buf = strconv.AppendBool(w.buf, !x.IsFalsy())
	case *tengo.Int:
		w.buf = strconv.AppendInt(w.buf, x.Value, 10)
	case *tengo.Float:
		if math.IsNaN(x.Value) || math.IsInf(x.Value, 0) {
			return errors.New("NaN and infinities are not JSON")
		}
		w.buf, _ = contract.AppendValue(w.buf, x.Value)
	case *tengo.String:
		if len(w.buf)+len(x.Value) > w.max {
			return fmt.Errorf("%w of %d bytes", errTooLarge, w.max)
		}
		w.buf = contract.AppendString(w.buf, x.Value)
	case *tengo.Array:
		return w.array(x.Value, depth)
	case *tengo.ImmutableArray:
		return w.array(x.Value, depth)
	case *tengo.Map:
		return w.object(x.Value, depth)
	case *tengo.ImmutableMap:
		return w.object(x.Value, depth)
	default:
		return fmt.Errorf("a %s value is not JSON", o.TypeName())
	}
	return nil
}

func (w *jsonWriter) array(a []tengo.Object, depth int) error {
	w.buf = append(w.buf, '[')
	for i, e := range a {
		if i > 0 {
			w.buf = append(w.buf, ',')
		}
		if err := w.value(e, depth+1); err != nil {
			return err
		}
	}
	w.buf = append(w.buf, ']')
	return nil
}

func (w *jsonWriter) object(m map[string]tengo.Object, depth int) error {
	w.buf = append(w.buf, '{')
	first := true
	for k, e := range m {
		if !first {
			w.buf = append(w.buf, ',')
		}
		first = false
		w.buf = append(contract.AppendString(w.buf, k), ':')
		if err := w.value(e, depth+1); err != nil {
			return err
		}
	}
	w.buf = append(w.buf, '}')
	return nil
}
