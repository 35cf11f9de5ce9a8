package auth

import (
	"github.com/registrum/registrum/host/config"
)

// Bounds of Evidence-profile claims, from the issuer specification.
const (
	// MaximumRequesterTags bounds the requester tags of one token.
	MaximumRequesterTags = 32
	// maximumEvidenceValueBytes bounds each evidence string value.
	maximumEvidenceValueBytes = 512
)

// Evidence holds the authority of an Evidence-profile token, read under the
// claim names the issuer's accessTokens.claims configures (mirrored in
// authentication.authorityClaims).
type Evidence struct {
	// RequesterTags are the client's registered requester tags. They also
	// stand for the token's scopes: a profile's requiredScopes names the
	// tags it requires (docs/decisions/evidence-tokens.md).
	RequesterTags []string
	// Audience is the client's registered evidence audience.
	Audience string
	// GrantID and GrantAuthority identify the client's registered grant;
	// both are "" when the registration has none.
	GrantID, GrantAuthority string
	// Actor is the actor of a delegated token, "" when not delegated or
	// when no actor claim is configured.
	Actor string
}

// evidenceNames are the configured claim names of Evidence-profile tokens.
type evidenceNames struct {
	requesterTags, audience, grantID, grantAuthority, actor string
}

func newEvidenceNames(ac config.AuthorityClaims) *evidenceNames {
	if !ac.Evidence() {
		return nil
	}
	return &evidenceNames{requesterTags: ac.RequesterTags, audience: ac.EvidenceAudience,
		grantID: ac.GrantID, grantAuthority: ac.GrantAuthority, actor: ac.Actor}
}

// read checks the evidence claims of raw, as the issuer writes them: a
// token with the requester-tags claim is an Evidence-profile token and
// must carry 1 to 32 non-empty tags, a non-empty evidence audience, the
// grant id and authority together or neither, and, when the actor claim is
// configured and present, a non-empty actor; it must carry no scope claim
// (the two profiles are exclusive). A token without requester tags must
// carry none of the other evidence claims. It returns nil for a token that
// is not an Evidence-profile token.
func (n *evidenceNames) read(raw map[string]any, scopeClaim string) (*Evidence, error) {
	tags, isEvidence := raw[n.requesterTags]
	if !isEvidence {
		for _, name := range []string{n.audience, n.grantID, n.grantAuthority, n.actor} {
			if _, ok := raw[name]; name != "" && ok {
				return nil, refuse(ReasonClaims, "evidence claims without requester tags")
			}
		}
		return nil, nil
	}
	if _, ok := raw[scopeClaim]; ok {
		return nil, refuse(ReasonClaims, "a token carries both scopes and requester tags")
	}
	list, ok := tags.([]any)
	if !ok || len(list) == 0 || len(list) > MaximumRequesterTags {
		return nil, refuse(ReasonClaims, "requester tags are not an array of 1 to %d strings", MaximumRequesterTags)
	}
	ev := &Evidence{RequesterTags: make([]string, 0, len(list))}
	for _, m := range list {
		s, ok := evidenceString(m)
		if !ok {
			return nil, refuse(ReasonClaims, "a requester tag is not a non-empty string")
		}
		ev.RequesterTags = append(ev.RequesterTags, s)
	}
	if ev.Audience, ok = evidenceString(raw[n.audience]); !ok {
		return nil, refuse(ReasonClaims, "the evidence audience is not a non-empty string")
	}
	gid, hasID := raw[n.grantID]
	gauth, hasAuthority := raw[n.grantAuthority]
	switch {
	case hasID != hasAuthority:
		return nil, refuse(ReasonClaims, "the grant id and grant authority come together")
	case hasID:
		var ok1, ok2 bool
		ev.GrantID, ok1 = evidenceString(gid)
		ev.GrantAuthority, ok2 = evidenceString(gauth)
		if !ok1 || !ok2 {
			return nil, refuse(ReasonClaims, "the grant id or authority is not a non-empty string")
		}
	}
	if n.actor != "" {
		if a, present := raw[n.actor]; present {
			if ev.Actor, ok = evidenceString(a); !ok {
				return nil, refuse(ReasonClaims, "the actor is not a non-empty string")
			}
		}
	}
	return ev, nil
}

// evidenceString reads a non-empty string of at most 512 bytes.
func evidenceString(v any) (string, bool) {
	s, ok := v.(string)
	return s, ok && s != "" && len(s) <= maximumEvidenceValueBytes
}
