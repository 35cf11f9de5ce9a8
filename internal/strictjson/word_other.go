//go:build !(amd64 || arm64 || 386 || wasm)

package strictjson

// word reads 8 bytes of b at i, little-endian.
func word(b []byte, i int) uint64 {
	_ = b[i+7]
	return uint64(b[i]) | uint64(b[i+1])<<8 | uint64(b[i+2])<<16 | uint64(b[i+3])<<24 |
		uint64(b[i+4])<<32 | uint64(b[i+5])<<40 | uint64(b[i+6])<<48 | uint64(b[i+7])<<56
}

// word32 reads 4 bytes of s at i, little-endian.
func word32(s string, i int) uint64 {
	_ = s[i+3]
	return uint64(s[i]) | uint64(s[i+1])<<8 | uint64(s[i+2])<<16 | uint64(s[i+3])<<24
}

// stringWord reads 8 bytes of s at i, little-endian.
func stringWord(s string, i int) uint64 {
	_ = s[i+7]
	return uint64(s[i]) | uint64(s[i+1])<<8 | uint64(s[i+2])<<16 | uint64(s[i+3])<<24 |
		uint64(s[i+4])<<32 | uint64(s[i+5])<<40 | uint64(s[i+6])<<48 | uint64(s[i+7])<<56
}
