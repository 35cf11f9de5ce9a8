package records

import (
	"crypto/hkdf"
	"crypto/hmac"
	"crypto/sha256"
	"encoding/binary"
	"encoding/hex"
	"fmt"
	"strings"
)

// Keys are the host's keyed-digest keys, derived from its root secret.
type Keys struct {
	etag      []byte
	reference []byte
	cursor    []byte
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
	return Keys{etag: etag, reference: ref, cursor: cursor}, nil
}

// keyed returns HMAC-SHA-256 of a domain label and length-prefixed parts.
func keyed(key []byte, domain string, parts ...string) []byte {
	m := hmac.New(sha256.New, key)
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
