package plugins

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"github.com/registrum/registrum/internal/canonjson"
	"github.com/registrum/registrum/model"
)

// VerifyPackage checks every module a package pins exactly as a starting
// host would (declaration, file present, bytes matching the pinned digest,
// compiling under the sandbox's contract), without starting anything. It
// returns the modules checked.
func VerifyPackage(ctx context.Context, packageFile string, cfg Config) ([]model.Module, error) {
	entries, dir, err := model.ReadModules(packageFile)
	if err != nil {
		return nil, fmt.Errorf("plugins: %w", err)
	}
	modules := make([]Module, len(entries))
	for i, e := range entries {
		modules[i] = Module{Module: e}
	}
	rt, err := NewRuntime(ctx, cfg)
	if err != nil {
		return nil, err
	}
	defer rt.Close(ctx)
	set, err := rt.Load(ctx, modules, dir)
	if err != nil {
		return nil, err
	}
	return entries, set.Close(ctx)
}

// ErrInput marks an input document `registrum plugins run` refuses before
// loading anything: not the document the module's kind takes (for a hook
// handler, not a captured event body).
var ErrInput = errors.New("plugins: bad input")

// RunFile runs one call of the module in file, as kind on engine, with the
// same sandbox and limits the host uses. It is what authors use while
// writing a module: the file is not pinned, so its own digest is used. It
// returns the validated output in canonical JSON.
func RunFile(ctx context.Context, cfg Config, engine model.Engine, kind model.ModuleKind, file string, input []byte) ([]byte, error) {
	b, err := os.ReadFile(file)
	if err != nil {
		return nil, fmt.Errorf("plugins: read module: %w", err)
	}
	m := Module{Module: model.Module{
		ID:     strings.TrimSuffix(filepath.Base(file), filepath.Ext(file)),
		Engine: engine,
		Kind:   kind,
		Path:   filepath.Base(file),
		SHA256: canonjson.DigestBytes(b),
	}}
	return RunModule(ctx, cfg, m, filepath.Dir(file), input)
}

// RunModule runs one call of m, a module of the package in folder dir,
// exactly as the host loads and calls it: its file must hash to the pinned
// digest, it gets its declared capabilities, and its output is held to its
// declared writes. The input is checked first, as the host hands it over:
// the document of the module's kind, and for a hook handler a captured
// event body (docs/schemas/plugin-hook-input.schema.json); a refused input
// is an ErrInput. An input over the byte limit is the runtime's refusal.
func RunModule(ctx context.Context, cfg Config, m Module, dir string, input []byte) ([]byte, error) {
	rt, err := NewRuntime(ctx, cfg)
	if err != nil {
		return nil, err
	}
	defer rt.Close(ctx)
	if len(input) <= rt.limits.MaxInputBytes {
		if _, err := checkInput(m.Kind, input); err != nil {
			return nil, fmt.Errorf("%w: %v", ErrInput, err)
		}
		if m.Kind == model.KindHookHandler {
			if err := CheckHookInput(input); err != nil {
				return nil, fmt.Errorf("%w: %v", ErrInput, err)
			}
		}
	}
	set, err := rt.Load(ctx, []Module{m}, dir)
	if err != nil {
		return nil, err
	}
	defer set.Close(ctx)
	return set.Call(ctx, m.ID, input)
}

// ParseLimits reads limits written as comma-separated key=value pairs:
// memoryPages=N, wallTime=<Go duration>, maxInputBytes=N, maxOutputBytes=N,
// maxAllocs=N. Keys not given keep their defaults. The error names the
// offending pair.
func ParseLimits(s string) (Limits, error) {
	var l Limits
	if strings.TrimSpace(s) == "" {
		return l, nil
	}
	seen := map[string]bool{}
	for _, pair := range strings.Split(s, ",") {
		key, val, ok := strings.Cut(strings.TrimSpace(pair), "=")
		if !ok || key == "" || val == "" {
			return l, fmt.Errorf("plugins: limits: %q is not key=value", pair)
		}
		if seen[key] {
			return l, fmt.Errorf("plugins: limits: %s given twice", key)
		}
		seen[key] = true
		var err error
		switch key {
		case "wallTime":
			var d time.Duration
			if d, err = time.ParseDuration(val); err == nil && d <= 0 {
				err = errors.New("must be positive")
			}
			l.WallTime = d
		case "memoryPages":
			var n uint64
			if n, err = strconv.ParseUint(val, 10, 32); err == nil && (n == 0 || n > maxMemoryPages) {
				err = fmt.Errorf("must be 1 to %d", maxMemoryPages)
			}
			l.MemoryPages = uint32(n)
		case "maxInputBytes", "maxOutputBytes", "maxAllocs":
			var n int64
			if n, err = strconv.ParseInt(val, 10, 64); err == nil && (n <= 0 || n > 1<<40) {
				err = errors.New("must be positive")
			}
			switch key {
			case "maxInputBytes":
				l.MaxInputBytes = int(n)
			case "maxOutputBytes":
				l.MaxOutputBytes = int(n)
			default:
				l.MaxAllocs = n
			}
		default:
			return l, fmt.Errorf("plugins: limits: unknown key %q (want memoryPages, wallTime, maxInputBytes, maxOutputBytes, maxAllocs)", key)
		}
		if err != nil {
			return l, fmt.Errorf("plugins: limits: %s=%s: %w", key, val, err)
		}
	}
	return l, nil
}
