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
	"sync"
)

// Keys are the host's keyed-digest keys, derived from its root secret.
type Keys struct {
	etag      keyedHash
	reference keyedHash
	cursor    []byte
}

// keyedHash is an HMAC-SHA-256 keyed once. Uses take keyed clones of it
// from a pool, each with a buffer for its input and output, so that a
// digest (an ETag on every read) allocates only the text it answers.
type keyedHash struct{ pool *sync.Pool }

// keyedState is one pooled keyed HMAC with its buffers.
type keyedState struct {
	h        hash.Hash
	in, text []byte
	sum      [sha256.Size]byte
}

func newKeyedHash(key []byte) keyedHash {
	m := hmac.New(sha256.New, key)
	// Reset stores the keyed inner and outer states, so a clone's Reset
	// and Sum restore them instead of hashing the padded key again.
	m.Reset()
	proto := m.(hash.Cloner)
	return keyedHash{pool: &sync.Pool{New: func() any {
		h, err := proto.Clone()
		if err != nil {
			// HMAC-SHA-256 always clones (crypto/hmac and crypto/sha256
			// implement hash.Cloner).
			panic("records: clone HMAC-SHA-256: " + err.Error())
		}
		return &keyedState{h: h}
	}}}
}

// maxPooledInput bounds the buffers a pooled state keeps.
const maxPooledInput = 4 << 10

// text returns prefix, the lowercase hex HMAC-SHA-256 of a domain label
// and length-prefixed parts, and suffix, as one string.
func (k keyedHash) text(prefix, suffix, domain string, parts ...string) string {
	st := k.pool.Get().(*keyedState)
	st.h.Reset()
	in := append(st.in[:0], domain...)
	for _, p := range parts {
		in = binary.BigEndian.AppendUint64(in, uint64(len(p)))
		in = append(in, p...)
	}
	st.h.Write(in)
	sum := st.h.Sum(st.sum[:0])
	out := append(st.text[:0], prefix...)
	out = hex.AppendEncode(out, sum)
	out = append(out, suffix...)
	text := string(out)
	if cap(in) <= maxPooledInput {
		st.in, st.text = in[:0], out[:0]
	} else {
		st.in, st.text = nil, nil
	}
	k.pool.Put(st)
	return text
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

// ETag returns the strong validator of one revision in one representation:
// `"engine-hmac-sha256:<64 hex>"`, quotes included.
func (k Keys) ETag(packageRevision, entityID, recordID, revision, representation string) string {
	return k.etag.text(`"engine-hmac-sha256:`, `"`, "engine-etag-v1", packageRevision, entityID, recordID, revision, representation)
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
	return k.reference.text("hmac-sha256:", "", "engine-principal-v1", principal)
}

// RecordReference returns the keyed, value-free reference of a record used
// in audit entries and events.
func (k Keys) RecordReference(entityID, recordID string) string {
	return k.reference.text("hmac-sha256:", "", "engine-record-v1", entityID, recordID)
}

// CursorPrincipal is the keyed reference of a principal reference that a
// history cursor of domain binds (hex): a cursor names its caller without
// carrying the principal's reference.
func (k Keys) CursorPrincipal(domain, principalReference string) string {
	return k.reference.text("", "", domain, principalReference)
}
