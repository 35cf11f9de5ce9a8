package proto

import (
	"context"
	"errors"
	"fmt"
	"io"
	"regexp"
)

// MaxContentBytes is the largest attachment any verifier accepts: the record
// service's largest slot size (16 MiB).
const MaxContentBytes = 16 << 20

// Outcome is a verifier's answer.
type Outcome string

// The three outcomes. The zero Outcome is not valid.
const (
	// Approved means the bytes may be used.
	Approved Outcome = "approved"
	// Rejected means the bytes must not be used; Verdict.Reason says why.
	Rejected Outcome = "rejected"
	// Retry means no decision was reached; the attachment stays pending and
	// is verified again later.
	Retry Outcome = "retry"
)

// Reason is the value-free category of a rejection. It never carries any
// part of the content or of a scanner's own message.
type Reason string

// The reason categories a verifier may give with a rejection.
const (
	// ReasonMalware: the content carries a malware or test-malware signature.
	ReasonMalware Reason = "malware"
	// ReasonPolicy: the content breaks a local content policy.
	ReasonPolicy Reason = "policy"
	// ReasonMalformed: the content is not a well-formed file of its media type.
	ReasonMalformed Reason = "malformed"
	// ReasonUnspecified: the verifier gave no category (the http kind).
	ReasonUnspecified Reason = "unspecified"
)

// Valid reports whether r is one of the defined reason categories.
func (r Reason) Valid() bool {
	switch r {
	case ReasonMalware, ReasonPolicy, ReasonMalformed, ReasonUnspecified:
		return true
	}
	return false
}

// Verdict is the result of one verification.
type Verdict struct {
	// Outcome is approved, rejected or retry.
	Outcome Outcome `json:"outcome"`
	// Reason is set only when Outcome is Rejected.
	Reason Reason `json:"reason,omitempty"`
}

// Valid reports whether v is a well-formed verdict: a known outcome, and a
// known reason exactly when the outcome is Rejected.
func (v Verdict) Valid() bool {
	switch v.Outcome {
	case Approved, Retry:
		return v.Reason == ""
	case Rejected:
		return v.Reason.Valid()
	}
	return false
}

// Attachment is the metadata of the bytes to verify, as the record service
// computed it when they were uploaded.
type Attachment struct {
	// SlotID is the attachment slot the bytes were uploaded to.
	SlotID string `json:"slotId"`
	// MediaType is the attachment's lowercase concrete media type.
	MediaType string `json:"mediaType"`
	// DeclaredSize is the exact number of bytes (at least 1).
	DeclaredSize int64 `json:"declaredSize"`
	// SHA256 is the SHA-256 of the bytes as 64 lowercase hex digits.
	SHA256 string `json:"sha256"`
}

var (
	slotIDPattern    = regexp.MustCompile(`^[A-Za-z][A-Za-z0-9_-]{0,63}$`)
	mediaTypePattern = regexp.MustCompile(`^[a-z0-9][a-z0-9!#$&^_.+-]{0,126}/[a-z0-9][a-z0-9!#$&^_.+-]{0,126}$`)
	hexDigestPattern = regexp.MustCompile(`^[0-9a-f]{64}$`)
)

// Validate checks the metadata against the limits every verifier shares and
// maxBytes, naming the first offending field.
func (a Attachment) Validate(maxBytes int64) error {
	switch {
	case !slotIDPattern.MatchString(a.SlotID):
		return errors.New("attachment slotId: must be an identifier of 1 to 64 characters")
	case !mediaTypePattern.MatchString(a.MediaType):
		return errors.New("attachment mediaType: must be a lowercase concrete media type type/subtype without parameters")
	case a.DeclaredSize < 1:
		return errors.New("attachment declaredSize: must be at least 1")
	case a.DeclaredSize > maxBytes:
		return fmt.Errorf("attachment declaredSize: %d exceeds the verifier's limit of %d bytes", a.DeclaredSize, maxBytes)
	case !hexDigestPattern.MatchString(a.SHA256):
		return errors.New("attachment sha256: must be 64 lowercase hex digits")
	}
	return nil
}

// Verifier decides whether attachment bytes may be used. The host's
// verifiers (plugins/verifier) and an author's verifier (sdk/verifier)
// implement this one interface.
//
// Verify reads the attachment's bytes from content; content must yield
// exactly att.DeclaredSize bytes hashing to att.SHA256. Implementations
// return by ctx's deadline.
type Verifier interface {
	Verify(ctx context.Context, att Attachment, content io.Reader) (Verdict, error)
}

// Cause is the value-free reason a verification ended in Retry: always one
// of a fixed list of words, never text from a plugin, a scanner or the
// content, so it is safe to log. The causes below are those a plugin may
// send in FinishReply.Cause; the host adds its own (plugins/verifier).
type Cause string

// The causes a plugin may send.
const (
	// CauseDeadline: the context ended before the verifier answered.
	CauseDeadline Cause = "deadline"
	// CausePluginContentMismatch: the plugin side found the bytes it received
	// did not match the declared size or digest.
	CausePluginContentMismatch Cause = "plugin-content-mismatch"
	// CauseVerifierError: the verifier's own code failed (an error or a panic).
	CauseVerifierError Cause = "verifier-error"
	// CauseVerifierRetry: the verifier's own code asked for a retry.
	CauseVerifierRetry Cause = "verifier-retry"
	// CauseInvalidVerdict: the verifier's own code returned a malformed verdict.
	CauseInvalidVerdict Cause = "invalid-verdict"
)

// FromPlugin reports whether c is one of the causes a plugin may send.
func (c Cause) FromPlugin() bool {
	switch c {
	case CauseDeadline, CausePluginContentMismatch, CauseVerifierError, CauseVerifierRetry, CauseInvalidVerdict:
		return true
	}
	return false
}
