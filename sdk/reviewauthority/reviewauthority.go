// Package reviewauthority helps an external review authority speak the
// review protocol of Registrum's record host: a submission is bound by its
// submission digest, the SHA-256 of the RFC 8785 (JSON Canonicalization
// Scheme) form of the body the authority received, which the authority
// echoes in its answer and in every result.
package reviewauthority

import (
	"crypto/sha256"
	"encoding/hex"
	"fmt"

	"github.com/registrum/registrum/internal/canonjson"
)

// SubmissionDigest returns "sha256:" and the lowercase hex SHA-256 of the
// canonical form of body, a submission as received. The record host sends
// its submission in any equivalent JSON form (it may keep it as PostgreSQL
// jsonb), so the digest is never taken of the received bytes themselves.
func SubmissionDigest(body []byte) (string, error) {
	canon, err := canonjson.Transform(body)
	if err != nil {
		return "", fmt.Errorf("reviewauthority: the submission is not canonicalizable JSON: %w", err)
	}
	sum := sha256.Sum256(canon)
	return "sha256:" + hex.EncodeToString(sum[:]), nil
}
