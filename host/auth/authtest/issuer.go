package authtest

import (
	"fmt"
	"testing"

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

// HostAuthentication returns the record host's `authentication` settings
// (one YAML line) that trust this issuer: its issuer id, key set and audience,
// scopes in "scope" split on spaces, and the purpose in claim "purpose".
func (is *Issuer) HostAuthentication() string {
	return fmt.Sprintf("authentication: {issuer: %q, jwksUrl: %q, audience: %q, scopeClaim: scope, scopeSeparator: ' ', authorityClaims: {purpose: purpose}}\n",
		is.Config.Issuer, is.JWKSURL, is.Config.AccessTokens.Audiences[0])
}
