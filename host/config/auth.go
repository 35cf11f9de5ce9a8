package config

import (
	"net/url"
	"time"
)

// Authentication configures the verification of bearer access tokens issued
// by one token issuer (see the issuer specification, "Verifying issued tokens").
type Authentication struct {
	// Issuer must equal the issued tokens' iss.
	Issuer string `yaml:"issuer"`
	// JWKSURL is the issuer's published key set.
	JWKSURL string `yaml:"jwksUrl"`
	// Audience is this deployment's one exact audience.
	Audience string `yaml:"audience"`
	// Algorithm is the token signature algorithm; only ES256.
	Algorithm string `yaml:"algorithm"`
	// ScopeClaim names the claim holding the scopes; ScopeSeparator splits it.
	ScopeClaim     string `yaml:"scopeClaim"`
	ScopeSeparator string `yaml:"scopeSeparator"`
	// AuthorityClaims name the claims profiles and row boundaries read.
	AuthorityClaims AuthorityClaims `yaml:"authorityClaims"`
	// RevokedKeyIDs are never accepted, even when cached.
	RevokedKeyIDs []string `yaml:"revokedKeyIds"`
	// ClockSkewSeconds is the allowance on exp and nbf. Default 30, at most 300.
	ClockSkewSeconds *int `yaml:"clockSkewSeconds"`
	// KeySetRefreshSeconds is how often the key set is fetched again.
	// Default 300, 10 to 86400.
	KeySetRefreshSeconds *int `yaml:"keySetRefreshSeconds"`
	// KeySetAllowanceSeconds is how long a held key set is used after the
	// last successful fetch when fetches fail. Default 3600, 60 to 604800.
	KeySetAllowanceSeconds *int `yaml:"keySetAllowanceSeconds"`
}

// AuthorityClaims name the token claims that carry authority. Principal
// and the evidence members mirror the issuer's accessTokens.claims and must
// equal it (issuer specification, "Verifying issued tokens", rule 6).
type AuthorityClaims struct {
	// Principal names the claim identifying the caller. Default "sub".
	Principal string `yaml:"principal"`
	// Purpose names the claim holding the caller's purpose, if any.
	Purpose string `yaml:"purpose"`
	// RequesterTags, EvidenceAudience, GrantID and GrantAuthority name the
	// claims of Evidence-profile tokens. They are set together or not at
	// all; unset, Evidence-profile tokens carry no authority here.
	RequesterTags    string `yaml:"requesterTags"`
	EvidenceAudience string `yaml:"evidenceAudience"`
	GrantID          string `yaml:"grantId"`
	GrantAuthority   string `yaml:"grantAuthority"`
	// Actor names the claim of delegated Evidence tokens that holds the
	// actor; optional, and only with the other evidence claims.
	Actor string `yaml:"actor"`
}

// Evidence reports whether the evidence claim names are configured.
func (a AuthorityClaims) Evidence() bool { return a.RequesterTags != "" }

// writtenClaims are the claims the issuer writes itself; no authority claim
// may take their names (sub only as the principal).
var writtenClaims = map[string]bool{"iss": true, "aud": true, "exp": true, "iat": true, "nbf": true, "jti": true, "client_id": true, "scope": true, "sub": true}

// validateEvidence checks the evidence claim names as the issuer checks
// accessTokens.claims: all four or none, the actor only with them, distinct
// from one another, from the principal, purpose and scope claims, and never
// a claim the issuer writes itself.
func (a *Authentication) validateEvidence(c *Config, p string) error {
	ac := &a.AuthorityClaims
	members := []struct{ key, name string }{
		{"requesterTags", ac.RequesterTags}, {"evidenceAudience", ac.EvidenceAudience},
		{"grantId", ac.GrantID}, {"grantAuthority", ac.GrantAuthority}, {"actor", ac.Actor},
	}
	set := 0
	for _, m := range members[:4] {
		if m.name != "" {
			set++
		}
	}
	if set == 0 {
		if ac.Actor != "" {
			return c.fail(p+".actor", "needs requesterTags, evidenceAudience, grantId and grantAuthority")
		}
		return nil
	}
	seen := map[string]string{ac.Principal: "principal", a.ScopeClaim: "the scopeClaim"}
	if ac.Purpose != "" {
		seen[ac.Purpose] = "purpose"
	}
	for _, m := range members {
		switch {
		case m.name == "" && m.key == "actor":
			continue
		case m.name == "":
			return c.fail(p+"."+m.key, "is required with the other evidence claims (requesterTags, evidenceAudience, grantId, grantAuthority)")
		case len(m.name) > 128:
			return c.fail(p+"."+m.key, "must be at most 128 bytes")
		case writtenClaims[m.name]:
			return c.fail(p+"."+m.key, "names %q, a claim the issuer writes itself", m.name)
		case seen[m.name] != "":
			return c.fail(p+"."+m.key, "names the same claim as %s", seen[m.name])
		}
		seen[m.name] = m.key
	}
	return nil
}

// Defaults of the authentication settings.
const (
	DefaultClockSkewSeconds       = 30
	DefaultKeySetRefreshSeconds   = 300
	DefaultKeySetAllowanceSeconds = 3600
)

// ClockSkew returns the allowance on exp and nbf.
func (a *Authentication) ClockSkew() time.Duration {
	return time.Duration(*a.ClockSkewSeconds) * time.Second
}

// KeySetRefresh returns the key set refresh interval.
func (a *Authentication) KeySetRefresh() time.Duration {
	return time.Duration(*a.KeySetRefreshSeconds) * time.Second
}

// KeySetAllowance returns how long a held key set outlives failed fetches.
func (a *Authentication) KeySetAllowance() time.Duration {
	return time.Duration(*a.KeySetAllowanceSeconds) * time.Second
}

func (a *Authentication) validate(c *Config, _ string) error {
	const p = "authentication"
	if a.Issuer == "" {
		return c.fail(p+".issuer", "is required")
	}
	u, err := url.Parse(a.JWKSURL)
	if err != nil || (u.Scheme != "https" && u.Scheme != "http") || u.Host == "" || u.User != nil || u.Fragment != "" {
		return c.fail(p+".jwksUrl", "must be an http or https URL with a host and no credentials or fragment")
	}
	if a.Audience == "" || len(a.Audience) > 512 {
		return c.fail(p+".audience", "must be 1 to 512 bytes")
	}
	if a.Algorithm == "" {
		a.Algorithm = "ES256"
	}
	if a.Algorithm != "ES256" {
		return c.fail(p+".algorithm", "must be ES256")
	}
	if a.ScopeClaim == "" {
		return c.fail(p+".scopeClaim", "is required")
	}
	if a.ScopeSeparator == "" {
		return c.fail(p+".scopeSeparator", "is required")
	}
	if a.AuthorityClaims.Principal == "" {
		a.AuthorityClaims.Principal = "sub"
	}
	if err := a.validateEvidence(c, p+".authorityClaims"); err != nil {
		return err
	}
	for _, b := range []struct {
		field    string
		v        **int
		def      int
		min, max int
	}{
		{"clockSkewSeconds", &a.ClockSkewSeconds, DefaultClockSkewSeconds, 0, 300},
		{"keySetRefreshSeconds", &a.KeySetRefreshSeconds, DefaultKeySetRefreshSeconds, 10, 86400},
		{"keySetAllowanceSeconds", &a.KeySetAllowanceSeconds, DefaultKeySetAllowanceSeconds, 60, 604800},
	} {
		if *b.v == nil {
			v := b.def
			*b.v = &v
		}
		if n := **b.v; n < b.min || n > b.max {
			return c.fail(p+"."+b.field, "must be %d to %d", b.min, b.max)
		}
	}
	return nil
}
