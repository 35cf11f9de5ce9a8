package auth_test

import (
	"context"
	"strings"
	"testing"

	"github.com/registrum/registrum/host/auth"
	"github.com/registrum/registrum/host/auth/authtest"
	"github.com/registrum/registrum/host/config"
	"github.com/registrum/registrum/issuer/issuertest"
)

func ip(v int) *int { return &v }

func TestVerifiesTokensOfTheRealIssuer(t *testing.T) {
	is := authtest.StartIssuer(t, issuertest.DevOptions{}, nil)
	cfg := &config.Authentication{
		Issuer: is.Config.Issuer, JWKSURL: is.JWKSURL, Audience: "urn:registrum:dev",
		Algorithm: "ES256", ScopeClaim: "scope", ScopeSeparator: " ",
		AuthorityClaims:  config.AuthorityClaims{Principal: "sub", Purpose: "purpose"},
		ClockSkewSeconds: ip(30), KeySetRefreshSeconds: ip(300), KeySetAllowanceSeconds: ip(3600),
	}
	v, err := auth.NewVerifier(cfg, nil)
	if err != nil {
		t.Fatal(err)
	}
	if err := v.Start(context.Background()); err != nil {
		t.Fatal(err)
	}
	defer v.Close()
	ctx := context.Background()

	c, err := v.Verify(ctx, is.Token(t, issuertest.StandardClientID))
	if err != nil {
		t.Fatalf("standard token refused: %v", err)
	}
	if !c.HasScope("records:read") || !c.HasScope("records:write") || c.Principal != "service:demo-standard" || c.Purpose != "local-development" || c.TokenID == "" {
		t.Fatalf("claims = %+v", c)
	}
	// An evidence token verifies too; it carries no scope claim, so no scopes.
	ev, err := v.Verify(ctx, is.Token(t, issuertest.EvidenceClientID))
	if err != nil {
		t.Fatalf("evidence token refused: %v", err)
	}
	if len(ev.Scopes) != 0 || ev.Principal != "service:demo-evidence" {
		t.Fatalf("evidence claims = %+v", ev)
	}

	// Another deployment's audience or issuer, and the issuer's key revoked by configuration.
	tok := is.Token(t, issuertest.StandardClientID)
	for name, tc := range map[string]struct {
		edit func(*config.Authentication)
		want auth.Reason
	}{
		"audience": {func(c *config.Authentication) { c.Audience = "urn:registrum:other" }, auth.ReasonAudience},
		"issuer":   {func(c *config.Authentication) { c.Issuer = strings.Replace(c.Issuer, "localhost", "example.org", 1) }, auth.ReasonIssuer},
		"revoked":  {func(c *config.Authentication) { c.RevokedKeyIDs = []string{is.Config.Signing.Active.KeyID} }, auth.ReasonKeyRevoked},
	} {
		other := *cfg
		tc.edit(&other)
		v2, err := auth.NewVerifier(&other, nil)
		if err != nil {
			t.Fatal(err)
		}
		_, err = v2.Verify(ctx, tok)
		if re, ok := auth.IsRefused(err); !ok || re.Reason != tc.want {
			t.Fatalf("%s: err = %v, want %s", name, err, tc.want)
		}
	}
}
