package interrupt

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/registrum/registrum/internal/testslack"
	"github.com/tetratelabs/wazero"
	"github.com/tetratelabs/wazero/api"
)

// module assembles a WebAssembly module from sections.
func module(sections ...[]byte) []byte {
	m := []byte{0, 'a', 's', 'm', 1, 0, 0, 0}
	for _, s := range sections {
		m = append(m, s...)
	}
	return m
}

// sec encodes a section.
func sec(id byte, content ...byte) []byte {
	return appendSection(nil, id, content)
}

var (
	typeVoid   = sec(1, 1, 0x60, 0, 0)                             // type 0: func () -> ()
	oneFunc    = sec(3, 1, 0)                                      // function 0 has type 0
	oneMemory  = sec(5, 1, 0, 1)                                   // memory of 1 page
	exportSpin = sec(7, 1, 4, 's', 'p', 'i', 'n', 0, 0)            // export function 0 as "spin"
	codeSpin   = sec(10, 1, 7, 0, 0x03, 0x40, 0x0C, 0, 0x0B, 0x0B) // loop br 0 end end
)

// TestInterruptStopsALoop checks a rewritten endless loop, compiled without
// wazero's own interruption, traps once the flag is set.
func TestInterruptStopsALoop(t *testing.T) {
	ctx := context.Background()
	src := module(typeVoid, oneFunc, oneMemory, exportSpin, codeSpin)
	code, err := AddChecks(src)
	if err != nil {
		t.Fatal(err)
	}
	rt := wazero.NewRuntime(ctx)
	defer rt.Close(ctx)
	mod, err := rt.Instantiate(ctx, code)
	if err != nil {
		t.Fatalf("the rewritten module does not instantiate: %v", err)
	}
	flag, ok := mod.ExportedGlobal(Export).(api.MutableGlobal)
	if !ok {
		t.Fatal("no mutable interrupt flag exported")
	}
	start := time.Now()
	time.AfterFunc(50*time.Millisecond, func() { flag.Set(1) })
	_, err = mod.ExportedFunction("spin").Call(ctx)
	if err == nil || !strings.Contains(err.Error(), "unreachable") {
		t.Fatalf("want an unreachable trap, got %v", err)
	}
	testslack.Stopped(t, "the spinning function", time.Since(start), 50*time.Millisecond)
}

// TestInterruptRefusals checks the rewrite refuses what it cannot rewrite
// safely.
func TestInterruptRefusals(t *testing.T) {
	for _, tc := range []struct {
		name string
		src  []byte
		want string
	}{
		{"not wasm", []byte("hello"), "not a WebAssembly"},
		{"start function", module(typeVoid, oneFunc, sec(8, 0), sec(10, 1, 2, 0, 0x0B)), "start function"},
		{"unknown opcode", module(typeVoid, oneFunc, sec(10, 1, 4, 0, 0xFD, 0x0C, 0x0B)), "opcode 0xfd"},
		{"reserved export", module(typeVoid, oneFunc, appendSection(nil, 7, appendName([]byte{1}, Export), []byte{0, 0}), sec(10, 1, 2, 0, 0x0B)), "reserved for the host"},
		{"undefined global", module(typeVoid, oneFunc, sec(10, 1, 6, 0, 0x41, 0, 0x24, 0, 0x0B)), "uses global 0"},
		{"truncated body", module(typeVoid, oneFunc, sec(10, 1, 9, 0, 0x0B)), "truncated"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := AddChecks(tc.src)
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("want an error saying %q, got %v", tc.want, err)
			}
		})
	}
}
