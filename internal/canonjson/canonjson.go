// Package canonjson is Registrum's one canonical-JSON helper: RFC 8785 (JSON
// Canonicalization Scheme) serialisation, and the sha256 content digests that
// are taken over it.
package canonjson

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"

	"github.com/gowebpki/jcs"
)

// Marshal encodes v as JSON and returns its RFC 8785 canonical form.
func Marshal(v any) ([]byte, error) {
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
