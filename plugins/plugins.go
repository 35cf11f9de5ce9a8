// Package plugins is Registrum's plugin runtime: it loads the reviewed
// modules a deployment pins (WebAssembly modules run by wazero and tengo
// scripts), checks each against its pinned sha256 digest, and runs calls in a
// sandbox with per-call limits on memory, wall time, allocations, input and
// output bytes.
//
// A module is a planner, a hook handler or an action handler. Its input and
// output are JSON documents whose shapes are the Go types of package
// plugins/contract and the JSON Schemas in docs/schemas. Both engines receive
// exactly the same input document, and the runtime validates and
// canonicalises every output, so the same logic written for either engine
// yields byte-identical results.
//
// A module that loops, exhausts its memory, traps or answers malformed output
// never harms the host: the call fails with a *Failure whose Kind says what
// happened and whose message carries no text the module controls.
package plugins

import (
	"fmt"
	"time"
)

// Limits bound every call of a module. A zero field takes its default.
type Limits struct {
	// MemoryPages caps a WebAssembly module's linear memory in 64 KiB pages.
	// Default 512 (32 MiB). A Go guest needs at least 128.
	MemoryPages uint32
	// WallTime bounds one call. Default 500 ms.
	WallTime time.Duration
	// InitTime bounds a fresh WebAssembly instance's initialisation (a Go
	// guest's runtime start), on its own, apart from any call. Default 5 s:
	// the start takes about 100 ms on an idle machine but more than the
	// default WallTime on a busy two-core one, and it runs once per
	// instance, when a module is loaded or an instance replaced, not per
	// call.
	InitTime time.Duration
	// MaxInputBytes bounds the input document. Default 1 MiB.
	MaxInputBytes int
	// MaxOutputBytes bounds the output document. Default 1 MiB.
	MaxOutputBytes int
	// MaxAllocs caps the objects a tengo script allocates in one call.
	// Default 200000.
	MaxAllocs int64
}

// Default limits.
const (
	DefaultMemoryPages    = 512
	DefaultWallTime       = 500 * time.Millisecond
	DefaultInitTime       = 5 * time.Second
	DefaultMaxInputBytes  = 1 << 20
	DefaultMaxOutputBytes = 1 << 20
	DefaultMaxAllocs      = 200000
)

// maxMemoryPages is the WebAssembly 32-bit memory ceiling (4 GiB).
const maxMemoryPages = 65536

// withDefaults returns l with zero fields set to their defaults, or an error
// naming a field that is out of range.
func (l Limits) withDefaults() (Limits, error) {
	if l.MemoryPages == 0 {
		l.MemoryPages = DefaultMemoryPages
	}
	if l.WallTime == 0 {
		l.WallTime = DefaultWallTime
	}
	if l.InitTime == 0 {
		l.InitTime = DefaultInitTime
	}
	if l.MaxInputBytes == 0 {
		l.MaxInputBytes = DefaultMaxInputBytes
	}
	if l.MaxOutputBytes == 0 {
		l.MaxOutputBytes = DefaultMaxOutputBytes
	}
	if l.MaxAllocs == 0 {
		l.MaxAllocs = DefaultMaxAllocs
	}
	switch {
	case l.MemoryPages > maxMemoryPages:
		return l, fmt.Errorf("plugins: limits: memoryPages %d is over %d", l.MemoryPages, maxMemoryPages)
	case l.WallTime < 0:
		return l, fmt.Errorf("plugins: limits: wallTime %s is negative", l.WallTime)
	case l.InitTime < 0:
		return l, fmt.Errorf("plugins: limits: initTime %s is negative", l.InitTime)
	case l.MaxInputBytes < 0:
		return l, fmt.Errorf("plugins: limits: maxInputBytes %d is negative", l.MaxInputBytes)
	case l.MaxOutputBytes < 0:
		return l, fmt.Errorf("plugins: limits: maxOutputBytes %d is negative", l.MaxOutputBytes)
	case l.MaxAllocs < 0:
		return l, fmt.Errorf("plugins: limits: maxAllocs %d is negative", l.MaxAllocs)
	}
	return l, nil
}
