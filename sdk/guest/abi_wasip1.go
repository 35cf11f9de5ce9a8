//go:build wasip1

package guest

import "unsafe"

// buffers keeps the input buffers the host allocated reachable, so the
// garbage collector does not reclaim them while the host holds their address.
var buffers = map[uint32][]byte{}

// output holds the latest output until the next call, which reuses its
// memory: the host copies an output before it calls again.
var output = make([]byte, 0, 4096)

func addr(b []byte) uint32 { return uint32(uintptr(unsafe.Pointer(unsafe.SliceData(b)))) }

// input returns the size bytes at the start of the buffer at ptr.
func input(ptr, size uint32) []byte {
	b := buffers[ptr]
	if uint32(len(b)) < size {
		return nil
	}
	return b[:size]
}

func reply(out []byte) uint64 {
	output = out
	if len(out) == 0 {
		return 0
	}
	return uint64(addr(out))<<32 | uint64(len(out))
}

//go:wasmexport registrum_abi_version
func abiVersion() uint32 { return 1 }

//go:wasmexport registrum_kinds
func kinds() uint32 {
	var k uint32
	if planner != nil || fastPlanner != nil {
		k |= 1
	}
	if hookHandler != nil {
		k |= 2
	}
	if actionHandler != nil {
		k |= 4
	}
	return k
}

//go:wasmexport registrum_alloc
func alloc(size uint32) uint32 {
	b := make([]byte, max(size, 1))
	buffers[addr(b)] = b
	return addr(b)
}

//go:wasmexport registrum_free
func free(ptr uint32) { delete(buffers, ptr) }

// scratch is the memory fast planner calls reuse: a module's instance runs
// one call at a time.
var scratch fastScratch

//go:wasmexport registrum_plan
func plan(ptr, size uint32) uint64 {
	return reply(appendPlan(output[:0], input(ptr, size), &scratch))
}

//go:wasmexport registrum_handle_event
func handleEvent(ptr, size uint32) uint64 { return reply(appendEvent(output[:0], input(ptr, size))) }

//go:wasmexport registrum_compute_action
func computeAction(ptr, size uint32) uint64 { return reply(appendAction(output[:0], input(ptr, size))) }
