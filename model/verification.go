package model

import "github.com/registrum/registrum/internal/canonjson"

// VerificationPolicyDigest returns the digest of a slot's verification
// policy: the canonical JSON SHA-256 of a scheme tag, the verifier (id, kind
// and its pinned binary digest or endpoint) and the policy id. Changing any
// of them makes earlier verdicts inapplicable. "" when the slot has no
// verification.
func (p *Package) VerificationPolicyDigest(slot *AttachmentSlot) string {
	if slot.Verification == nil {
		return ""
	}
	doc := map[string]any{"scheme": "registrum-attachment-verification-v1", "verifier": slot.Verification.Verifier, "policyId": slot.Verification.PolicyID}
	for _, v := range p.Verifiers {
		if v.ID == slot.Verification.Verifier {
			doc["kind"] = string(v.Kind)
			if v.Kind == VerifierHTTP {
				doc["endpoint"] = v.Endpoint
			} else {
				doc["sha256"] = v.SHA256
			}
		}
	}
	d, err := canonjson.Digest(doc)
	if err != nil {
		panic("model: policy digest: " + err.Error()) // plain strings always encode
	}
	return d
}
