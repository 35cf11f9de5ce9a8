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

// AuthorityClaims name the token claims that carry authority.
type AuthorityClaims struct {
	// Principal names the claim identifying the caller. Default "sub".
	Principal string `yaml:"principal"`
	// Purpose names the claim holding the caller's purpose, if any.
	Purpose string `yaml:"purpose"`
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
