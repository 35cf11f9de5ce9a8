package auth

import (
	"errors"
	"fmt"
)

// Reason is the category of a token refusal. It is safe to log: it never
// carries any part of the token.
type Reason string

// Reasons a token is refused.
const (
	// ReasonMalformed: not a compact JWS of acceptable size and shape, or
	// claims that are not a JSON object of the expected member types.
	ReasonMalformed Reason = "malformed"
	// ReasonHeader: the algorithm is not the configured one, typ is not
	// at+jwt, or kid is missing.
	ReasonHeader Reason = "header"
	// ReasonKeyRevoked: the token names a revoked key id.
	ReasonKeyRevoked Reason = "key-revoked"
	// ReasonKeyUnknown: the token names a key the issuer's key set does not hold.
	ReasonKeyUnknown Reason = "key-unknown"
	// ReasonNoKeySet: no usable key set is held (never retrieved, or its
	// allowance has ended).
	ReasonNoKeySet Reason = "no-key-set"
	// ReasonSignature: the signature does not verify with the named key.
	ReasonSignature Reason = "signature"
	// ReasonIssuer: iss is not the configured issuer.
	ReasonIssuer Reason = "issuer"
	// ReasonAudience: aud is not this deployment's audience.
	ReasonAudience Reason = "audience"
	// ReasonExpired: exp has passed, beyond the clock skew.
	ReasonExpired Reason = "expired"
	// ReasonNotYetValid: nbf or iat lies in the future, beyond the clock skew.
	ReasonNotYetValid Reason = "not-yet-valid"
	// ReasonLifetime: the token lives longer than the verifier's ceiling.
	ReasonLifetime Reason = "lifetime"
	// ReasonClaims: a required claim (exp, jti) is missing or of the wrong type.
	ReasonClaims Reason = "claims"
)

// RefusedError is the one error Verify returns for a token it refuses. Its
// message names only the reason category, never the token or its claims.
type RefusedError struct {
	// Reason is the refusal category.
	Reason Reason
	// msg adds a short, token-free explanation for logs.
	msg string
}

func (e *RefusedError) Error() string {
	if e.msg == "" {
		return "auth: token refused: " + string(e.Reason)
	}
	return "auth: token refused: " + string(e.Reason) + ": " + e.msg
}

func refuse(r Reason, format string, args ...any) *RefusedError {
	return &RefusedError{Reason: r, msg: fmt.Sprintf(format, args...)}
}

// IsRefused reports whether err is (or wraps) a token refusal, and returns it.
func IsRefused(err error) (*RefusedError, bool) {
	var re *RefusedError
	ok := errors.As(err, &re)
	return re, ok
}
