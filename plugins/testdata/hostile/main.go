//go:build wasip1

// Command hostile is a WebAssembly planner that attacks its sandbox, for the
// runtime's tests. It speaks the guest ABI by hand (not through sdk/guest) so
// it can also break the ABI. The request field "attack" picks the attack;
// attacks that the sandbox should merely deny report what happened as the
// value of a "result" field in a one-effect plan.
package main

import (
	"bytes"
	"crypto/rand"
	"fmt"
	"net"
	"os"
	"strings"
	"time"
	"unsafe"
)

var pinned = map[uint32][]byte{}

func pin(b []byte) uint32 {
	if len(b) == 0 {
		b = make([]byte, 1)[:0]
	}
	p := uint32(uintptr(unsafe.Pointer(unsafe.SliceData(b))))
	pinned[p] = b
	return p
}

//go:wasmexport registrum_abi_version
func abiVersion() uint32 { return 1 }

//go:wasmexport registrum_kinds
func kinds() uint32 { return 1 | 2 }

// handleEvent reports the clock year and eight random bytes as a retry
// kind, so tests can see whether capabilities were granted.
//
//go:wasmexport registrum_handle_event
func handleEvent(ptr, size uint32) uint64 {
	b := make([]byte, 8)
	_, _ = rand.Read(b)
	out := []byte(fmt.Sprintf(`{"outcome":"retry","kind":"y%d_%x"}`, time.Now().Year(), b))
	last = out
	return uint64(uintptr(unsafe.Pointer(unsafe.SliceData(out))))<<32 | uint64(len(out))
}

//go:wasmexport registrum_alloc
func alloc(size uint32) uint32 { return pin(make([]byte, size)) }

//go:wasmexport registrum_free
func free(ptr uint32) { delete(pinned, ptr) }

var hoard [][]byte
var churn []byte
var calls int

// member returns the string value of "name" in a flat JSON input.
func member(in, name string) string {
	i := strings.Index(in, `"`+name+`":"`)
	if i < 0 {
		return ""
	}
	v := in[i+len(name)+4:]
	return v[:strings.IndexByte(v, '"')]
}

func result(s string) []byte {
	return []byte(fmt.Sprintf(`{"effects":[{"id":"probe","operation":"create","target":{"entity":"probe"},"set":{"result":{"value":%q}}}]}`, s))
}

//go:wasmexport registrum_plan
func plan(ptr, size uint32) uint64 {
	in := string(pinned[ptr][:size])
	attack := member(in, "attack")
	calls++
	var out []byte
	switch attack {
	case "loop":
		for {
		}
	case "memory":
		for {
			hoard = append(hoard, make([]byte, 1<<20))
		}
	case "trap":
		var p *int
		return uint64(*p)
	case "file":
		var seen []string
		if b, err := os.ReadFile("/etc/passwd"); err == nil {
			seen = append(seen, "read:"+string(b))
		}
		if ents, err := os.ReadDir("/"); err == nil {
			seen = append(seen, fmt.Sprintf("listed:%d", len(ents)))
		}
		if f, err := os.Create("/tmp/registrum-hostile"); err == nil {
			f.Close()
			seen = append(seen, "created")
		}
		out = result("file:" + strings.Join(seen, ","))
	case "network":
		var seen []string
		// Go's wasip1 port has an in-process fake network; a dial to a real
		// host listener must still fail.
		if c, err := net.Dial("tcp", member(in, "target")); err == nil {
			c.Close()
			seen = append(seen, "dialed")
		}
		out = result("network:" + strings.Join(seen, ","))
	case "env":
		out = result(fmt.Sprintf("env:%d:%s", len(os.Environ()), strings.Join(os.Args, " ")))
	case "clock":
		b := make([]byte, 8)
		_, _ = rand.Read(b)
		out = result(fmt.Sprintf("clock:%d:%x", time.Now().Year(), b))
	case "churn":
		// Make garbage the collector must reclaim within the call (the
		// runtime reads its clock in every collection).
		for range 64 {
			churn = make([]byte, 1<<20)
		}
		out = result("ok")
	case "state":
		out = result(fmt.Sprintf("state:%d", calls))
	case "big":
		out = bytes.Repeat([]byte(" "), 10<<20)
		copy(out, result("big"))
	case "garbage":
		out = []byte("this is not JSON")
	case "badptr":
		return uint64(0xfffffff0)<<32 | 64
	case "exit":
		os.Exit(3)
	default:
		out = result("ok")
	}
	last = out
	return uint64(uintptr(unsafe.Pointer(unsafe.SliceData(out))))<<32 | uint64(len(out))
}

// last keeps the latest output reachable until the next call.
var last []byte

func main() {}
