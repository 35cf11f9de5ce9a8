// Package canonjson is Registrum's one canonical-JSON helper: RFC 8785 (JSON
// Canonicalization Scheme) serialisation, and the sha256 content digests that
// are taken over it.
package canonjson

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"unicode/utf8"

	"github.com/gowebpki/jcs"
)

// Marshal encodes v as JSON and returns its RFC 8785 canonical form. A
// decoded JSON value (what AppendValue takes: maps, slices of any, strings,
// numbers, booleans and nil) is written directly; anything else is encoded
// by encoding/json and canonicalized, which writes the same bytes for a
// decoded value, three to five times slower.
func Marshal(v any) ([]byte, error) {
	if validNames(v) {
		if b, err := AppendValue(nil, v); err == nil {
			return b, nil
		}
	}
	return marshalReflect(v)
}

// validNames reports whether every member name of the maps v holds is valid
// UTF-8. Two invalid names can become the same once replaced by U+FFFD,
// which the canonicalizing parse refuses and AppendValue would write twice:
// such values take marshalReflect's way, and its refusal.
func validNames(v any) bool {
	switch x := v.(type) {
	case map[string]any:
		for k, e := range x {
			if !utf8.ValidString(k) || !validNames(e) {
				return false
			}
		}
	case []any:
		for _, e := range x {
			if !validNames(e) {
				return false
			}
		}
	}
	return true
}

// marshalReflect is Marshal through encoding/json and a canonicalizing
// parse of its output, for every Go value encoding/json takes.
func marshalReflect(v any) ([]byte, error) {
	raw, err := json.Marshal(v)
	if err != nil {
		return nil, fmt.Errorf("canonjson: encode: %w", err)
	}
	return Transform(raw)
}

// Transform returns the RFC 8785 canonical form of a JSON document.
func Transform(doc []byte) ([]byte, error) {
	out, err := jcs.Transform(doc)
	if err != nil {
		return nil, fmt.Errorf("canonjson: canonicalize: %w", err)
	}
	return out, nil
}

// Digest returns "sha256:<64 lowercase hex>" of the canonical form of v.
func Digest(v any) (string, error) {
	b, err := Marshal(v)
	if err != nil {
		return "", err
	}
	return DigestBytes(b), nil
}

// DigestBytes returns "sha256:<64 lowercase hex>" of b exactly as given.
func DigestBytes(b []byte) string {
	sum := sha256.Sum256(b)
	return "sha256:" + hex.EncodeToString(sum[:])
}
