//go:build wasip1

package guest

import "unsafe"

// pinned keeps buffers shared with the host reachable, so the garbage
// collector does not reclaim them while the host holds their address.
var pinned = map[uint32][]byte{}

func pin(b []byte) uint32 {
	if len(b) == 0 {
		b = make([]byte, 1)[:0]
	}
	ptr := uint32(uintptr(unsafe.Pointer(unsafe.SliceData(b))))
	pinned[ptr] = b
	return ptr
}

// take returns the pinned input buffer at ptr and unpins it.
func take(ptr, size uint32) []byte {
	b := pinned[ptr]
	delete(pinned, ptr)
	if uint32(len(b)) < size {
		return nil
	}
	return b[:size]
}

func reply(out []byte) uint64 {
	return uint64(pin(out))<<32 | uint64(len(out))
}

//go:wasmexport registrum_abi_version
func abiVersion() uint32 { return 1 }

//go:wasmexport registrum_kinds
func kinds() uint32 {
	var k uint32
	if planner != nil {
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
func alloc(size uint32) uint32 { return pin(make([]byte, size)) }

//go:wasmexport registrum_free
func free(ptr uint32) { delete(pinned, ptr) }

//go:wasmexport registrum_plan
func plan(ptr, size uint32) uint64 { return reply(RunPlan(take(ptr, size))) }

//go:wasmexport registrum_handle_event
func handleEvent(ptr, size uint32) uint64 { return reply(RunEvent(take(ptr, size))) }

//go:wasmexport registrum_compute_action
func computeAction(ptr, size uint32) uint64 { return reply(RunAction(take(ptr, size))) }
