package records

import (
	"crypto/hkdf"
	"crypto/hmac"
	"crypto/sha256"
	"encoding/binary"
	"encoding/hex"
	"fmt"
	"hash"
	"strings"
)

// Keys are the host's keyed-digest keys, derived from its root secret.
type Keys struct {
	etag      keyedHash
	reference keyedHash
	cursor    []byte
}

// keyedHash is an HMAC-SHA-256 keyed once; every use starts from a clone of
// it, which saves keying the hash again on each request.
type keyedHash struct{ proto hash.Cloner }

func newKeyedHash(key []byte) keyedHash {
	m := hmac.New(sha256.New, key)
	// Reset stores the keyed inner and outer states, so a clone's Sum
	// restores the outer state instead of hashing the padded key again.
	m.Reset()
	return keyedHash{proto: m.(hash.Cloner)}
}

func (k keyedHash) new() hash.Hash {
	h, err := k.proto.Clone()
	if err != nil {
		// HMAC-SHA-256 always clones (crypto/hmac and crypto/sha256 implement
		// hash.Cloner).
		panic("records: clone HMAC-SHA-256: " + err.Error())
	}
	return h
}

// DeriveKeys derives the ETag, reference and cursor keys from the host's root secret
// with HKDF-SHA-256 under distinct labels.
func DeriveKeys(root []byte) (Keys, error) {
	etag, err := hkdf.Key(sha256.New, root, nil, "registrum etag v1", 32)
	if err != nil {
		return Keys{}, fmt.Errorf("records: derive keys: %w", err)
	}
	ref, err := hkdf.Key(sha256.New, root, nil, "registrum reference v1", 32)
	if err != nil {
		return Keys{}, fmt.Errorf("records: derive keys: %w", err)
	}
	cursor, err := hkdf.Key(sha256.New, root, nil, "registrum cursor v1", 32)
	if err != nil {
		return Keys{}, fmt.Errorf("records: derive keys: %w", err)
	}
	return Keys{etag: newKeyedHash(etag), reference: newKeyedHash(ref), cursor: cursor}, nil
}

// keyed returns HMAC-SHA-256 of a domain label and length-prefixed parts.
func keyed(key keyedHash, domain string, parts ...string) []byte {
	m := key.new()
	m.Write([]byte(domain))
	var n [8]byte
	for _, p := range parts {
		binary.BigEndian.PutUint64(n[:], uint64(len(p)))
		m.Write(n[:])
		m.Write([]byte(p))
	}
	return m.Sum(nil)
}

// ETag returns the strong validator of one revision in one representation:
// `"engine-hmac-sha256:<64 hex>"`, quotes included.
func (k Keys) ETag(packageRevision, entityID, recordID, revision, representation string) string {
	sum := keyed(k.etag, "engine-etag-v1", packageRevision, entityID, recordID, revision, representation)
	return `"engine-hmac-sha256:` + hex.EncodeToString(sum) + `"`
}

// splitETags splits an If-Match list into its entity tags.
func splitETags(h string) []string {
	var out []string
	for _, part := range strings.Split(h, ",") {
		if t := strings.TrimSpace(part); t != "" {
			out = append(out, t)
		}
	}
	return out
}

// MatchETag compares a client's If-Match value with the current ETag in
// constant time.
func MatchETag(got, want string) bool {
	return hmac.Equal([]byte(got), []byte(want))
}

// PrincipalReference returns the keyed, value-free reference of a caller.
func (k Keys) PrincipalReference(principal string) string {
	return "hmac-sha256:" + hex.EncodeToString(keyed(k.reference, "engine-principal-v1", principal))
}

// RecordReference returns the keyed, value-free reference of a record used
// in audit entries and events.
func (k Keys) RecordReference(entityID, recordID string) string {
	return "hmac-sha256:" + hex.EncodeToString(keyed(k.reference, "engine-record-v1", entityID, recordID))
}

// CursorPrincipal is the keyed reference of a principal reference that a
// history cursor of domain binds (hex): a cursor names its caller without
// carrying the principal's reference.
func (k Keys) CursorPrincipal(domain, principalReference string) string {
	return hex.EncodeToString(keyed(k.reference, domain, principalReference))
}
