package authtest

import (
	"encoding/json"
	"fmt"
	"strings"
	"testing"

	"github.com/registrum/registrum/host/config"
	"github.com/registrum/registrum/issuer/issuertest"
)

// Issuer is a real token issuer (see issuer/issuertest) that the record
// host can be configured to trust.
type Issuer struct {
	*issuertest.Issuer
}

// StartIssuer starts a real issuer from its dev deployment with opts, after
// edit (nil: none) has changed its files.
func StartIssuer(t testing.TB, opts issuertest.DevOptions, edit func(dir string)) *Issuer {
	t.Helper()
	return &Issuer{issuertest.Start(t, issuertest.Options{Dev: opts, Edit: edit})}
}

// Authentication returns the record host's authentication settings that
// trust this issuer, as an operator pairs them (issuer specification,
// "Verifying issued tokens"): its issuer id, key set and first audience;
// scopes in "scope" split on spaces; the purpose in claim "purpose"; the
// principal and the evidence claim names equal to its accessTokens.claims;
// and its signing.revokedKeyIds. Defaults are filled in as config.Load
// fills them.
func (is *Issuer) Authentication() *config.Authentication {
	a := &config.Authentication{
		Issuer: is.Config.Issuer, JWKSURL: is.JWKSURL, Audience: is.Config.AccessTokens.Audiences[0],
		Algorithm: "ES256", ScopeClaim: "scope", ScopeSeparator: " ",
		AuthorityClaims: config.AuthorityClaims{Principal: "sub", Purpose: "purpose"},
		RevokedKeyIDs:   append([]string(nil), is.Config.Signing.RevokedKeyIDs...),
	}
	if n := is.Config.AccessTokens.Claims; n != nil {
		ac := &a.AuthorityClaims
		ac.Principal, ac.RequesterTags, ac.EvidenceAudience = n.Principal, n.RequesterTags, n.EvidenceAudience
		ac.GrantID, ac.GrantAuthority, ac.Actor = n.GrantID, n.GrantAuthority, n.Actor
	}
	skew, refresh, allowance := config.DefaultClockSkewSeconds, config.DefaultKeySetRefreshSeconds, config.DefaultKeySetAllowanceSeconds
	a.ClockSkewSeconds, a.KeySetRefreshSeconds, a.KeySetAllowanceSeconds = &skew, &refresh, &allowance
	return a
}

// HostAuthentication returns the record host's `authentication` section
// (one YAML line) holding the settings of Authentication.
func (is *Issuer) HostAuthentication() string {
	a := is.Authentication()
	ac := a.AuthorityClaims
	claims := []string{"principal: " + q(ac.Principal), "purpose: " + q(ac.Purpose)}
	for _, m := range []struct{ key, name string }{
		{"requesterTags", ac.RequesterTags}, {"evidenceAudience", ac.EvidenceAudience},
		{"grantId", ac.GrantID}, {"grantAuthority", ac.GrantAuthority}, {"actor", ac.Actor},
	} {
		if m.name != "" {
			claims = append(claims, m.key+": "+q(m.name))
		}
	}
	revoked := make([]string, len(a.RevokedKeyIDs))
	for i, kid := range a.RevokedKeyIDs {
		revoked[i] = q(kid)
	}
	return fmt.Sprintf("authentication: {issuer: %s, jwksUrl: %s, audience: %s, scopeClaim: scope, scopeSeparator: ' ', authorityClaims: {%s}, revokedKeyIds: [%s]}\n",
		q(a.Issuer), q(a.JWKSURL), q(a.Audience), strings.Join(claims, ", "), strings.Join(revoked, ", "))
}

// q quotes s as a YAML (JSON) string.
func q(s string) string {
	b, _ := json.Marshal(s)
	return string(b)
}
