//go:build amd64 || arm64 || 386 || wasm

package strictjson

import "unsafe"

// word reads 8 bytes of b at i, little-endian, in one load: these platforms
// are little-endian and allow unaligned loads. (Go's WebAssembly compiler
// does not merge byte loads, so the portable version costs eight.)
func word(b []byte, i int) uint64 {
	_ = b[i+7]
	return *(*uint64)(unsafe.Pointer(&b[i]))
}

// word32 reads 4 bytes of s at i, little-endian, in one load.
func word32(s string, i int) uint64 {
	_ = s[i+3]
	return uint64(*(*uint32)(unsafe.Pointer(unsafe.StringData(s[i:]))))
}

// stringWord reads 8 bytes of s at i, little-endian, in one load.
func stringWord(s string, i int) uint64 {
	_ = s[i+7]
	return *(*uint64)(unsafe.Pointer(unsafe.StringData(s[i:])))
}
