package audit

import (
	"crypto/hmac"
	"crypto/rand"
	"crypto/sha256"
	"encoding/binary"
	"encoding/hex"
	"fmt"
	"strconv"
	"strings"
	"time"
)

// Outcomes of a decision.
const (
	OutcomeIssued = "issued"
	OutcomeDenied = "denied"
)

// Pseudonym labels accepted in [Entry.Pseudonyms].
const (
	LabelClient    = "client"
	LabelPrincipal = "principal"
	LabelAuthority = "authority"
	LabelSubject   = "subject"
	LabelActor     = "actor"
)

var allowedLabels = map[string]bool{
	LabelClient: true, LabelPrincipal: true, LabelAuthority: true, LabelSubject: true, LabelActor: true,
}

// Entry is one decision. It is value-free: it never holds raw assertions,
// tokens, client ids, principals, authority values, actors or subjects;
// identities appear only as keyed pseudonyms made by [Writer.Pseudonym].
// [Writer.Append] refuses an entry that does not have the shape of its outcome.
type Entry struct {
	// OperationID identifies the decision; the issuer makes it with [NewOperationID].
	OperationID string
	// Outcome is [OutcomeIssued] or [OutcomeDenied].
	Outcome string
	// Category is set for denials only: a value-free category such as
	// "invalid_client", "invalid_request", "unsupported_grant_type" or
	// "server_error" (lowercase letters, digits and underscores).
	Category string
	// TokenID is set for issued tokens only: the token's jti.
	TokenID string
	// KeyID is set for issued tokens only: the signing key id.
	KeyID string
	// ExpiresAt is set for issued tokens only: the token expiry, stored in
	// whole Unix seconds.
	ExpiresAt time.Time
	// Delegated is set for issued tokens only: whether the token acts for a subject.
	Delegated bool
	// Pseudonyms is set for issued tokens only: label (one of the Label
	// constants) to a pseudonym computed by [Writer.Pseudonym].
	Pseudonyms map[string]string
}

// NewOperationID returns a fresh random operation id: 32 lowercase hex
// characters from the system's secure random source.
func NewOperationID() string {
	var b [16]byte
	_, _ = rand.Read(b[:]) // crypto/rand.Read never fails on supported platforms.
	return hex.EncodeToString(b[:])
}

// record is the decision as stored inside a chain line.
type record struct {
	OperationID string            `json:"operationId"`
	Outcome     string            `json:"outcome"`
	Category    string            `json:"category,omitempty"`
	TokenID     string            `json:"tokenId,omitempty"`
	KeyID       string            `json:"keyId,omitempty"`
	ExpiresAt   int64             `json:"expiresAt,omitempty"`
	Delegated   *bool             `json:"delegated,omitempty"`
	Pseudonyms  map[string]string `json:"pseudonyms,omitempty"`
}

// Field limits of an entry.
const (
	maxOperationIDBytes = 128
	maxIDBytes          = 256
	maxCategoryBytes    = 64
)

// toRecord validates e against the shape of its outcome and the pseudonym
// format of key version v, and converts it to its stored form.
func (e Entry) toRecord(v uint32) (record, error) {
	if err := checkToken("operation id", e.OperationID, maxOperationIDBytes); err != nil {
		return record{}, err
	}
	r := record{OperationID: e.OperationID, Outcome: e.Outcome}
	switch e.Outcome {
	case OutcomeDenied:
		if !validCategory(e.Category) {
			return record{}, fmt.Errorf("audit: entry: denial category must be 1 to %d bytes of a-z, 0-9 and _, starting with a letter", maxCategoryBytes)
		}
		if e.TokenID != "" || e.KeyID != "" || !e.ExpiresAt.IsZero() || e.Delegated || len(e.Pseudonyms) != 0 {
			return record{}, fmt.Errorf("audit: entry: a denial carries only its category; token id, key id, expiry, delegation and pseudonyms must be empty")
		}
		r.Category = e.Category
	case OutcomeIssued:
		if e.Category != "" {
			return record{}, fmt.Errorf("audit: entry: an issued entry has no category")
		}
		if err := checkToken("token id", e.TokenID, maxIDBytes); err != nil {
			return record{}, err
		}
		if err := checkToken("key id", e.KeyID, maxIDBytes); err != nil {
			return record{}, err
		}
		exp := e.ExpiresAt.Unix()
		if e.ExpiresAt.IsZero() || exp <= 0 {
			return record{}, fmt.Errorf("audit: entry: an issued entry needs an expiry after the Unix epoch")
		}
		if len(e.Pseudonyms) == 0 {
			return record{}, fmt.Errorf("audit: entry: an issued entry needs at least the %q pseudonym", LabelClient)
		}
		prefix := pseudonymPrefix(v)
		for label, p := range e.Pseudonyms {
			if !allowedLabels[label] {
				return record{}, fmt.Errorf("audit: entry: pseudonym label %q is not one of client, principal, authority, subject, actor", label)
			}
			if !isPseudonym(p, prefix) {
				// The value is not echoed: it may be a raw identity passed by mistake.
				return record{}, fmt.Errorf("audit: entry: pseudonyms[%q] is not a pseudonym of hash key version %d (use Writer.Pseudonym)", label, v)
			}
		}
		d := e.Delegated
		r.TokenID, r.KeyID, r.ExpiresAt, r.Delegated = e.TokenID, e.KeyID, exp, &d
		r.Pseudonyms = make(map[string]string, len(e.Pseudonyms))
		for k, p := range e.Pseudonyms {
			r.Pseudonyms[k] = p
		}
	default:
		return record{}, fmt.Errorf("audit: entry: outcome must be %q or %q", OutcomeIssued, OutcomeDenied)
	}
	return r, nil
}

// encode validates e (see toRecord) and returns its canonical record bytes.
func (e Entry) encode(v uint32) ([]byte, error) {
	r, err := e.toRecord(v)
	if err != nil {
		return nil, err
	}
	return canonicalRecord(r)
}

// checkToken requires 1..max bytes of A-Z a-z 0-9 and . _ : ~ -.
func checkToken(what, s string, max int) error {
	if s == "" || len(s) > max {
		return fmt.Errorf("audit: entry: %s must be 1 to %d bytes", what, max)
	}
	for i := 0; i < len(s); i++ {
		c := s[i]
		if !(c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '.' || c == '_' || c == ':' || c == '~' || c == '-') {
			return fmt.Errorf("audit: entry: %s may hold only A-Z a-z 0-9 . _ : ~ -", what)
		}
	}
	return nil
}

func validCategory(s string) bool {
	if s == "" || len(s) > maxCategoryBytes || s[0] < 'a' || s[0] > 'z' {
		return false
	}
	for i := 0; i < len(s); i++ {
		c := s[i]
		if !(c >= 'a' && c <= 'z' || c >= '0' && c <= '9' || c == '_') {
			return false
		}
	}
	return true
}

// pseudonymPrefix is the label every pseudonym of key version v starts with.
func pseudonymPrefix(v uint32) string {
	return "hmac-sha256:v" + strconv.FormatUint(uint64(v), 10) + ":"
}

func isPseudonym(p, prefix string) bool {
	rest, ok := strings.CutPrefix(p, prefix)
	return ok && isLowerHex(rest, 64)
}

func isLowerHex(s string, n int) bool {
	if len(s) != n {
		return false
	}
	for i := 0; i < len(s); i++ {
		c := s[i]
		if !(c >= '0' && c <= '9' || c >= 'a' && c <= 'f') {
			return false
		}
	}
	return true
}

// pseudonym computes "hmac-sha256:v<version>:<64 hex>" over the
// length-prefixed label and value, so no two (label, value) pairs share input.
func (k keys) pseudonymOf(label, value string) string {
	m := hmac.New(sha256.New, k.pseudonym)
	var n [8]byte
	binary.BigEndian.PutUint64(n[:], uint64(len(label)))
	m.Write(n[:])
	m.Write([]byte(label))
	binary.BigEndian.PutUint64(n[:], uint64(len(value)))
	m.Write(n[:])
	m.Write([]byte(value))
	return pseudonymPrefix(k.version) + hex.EncodeToString(m.Sum(nil))
}
