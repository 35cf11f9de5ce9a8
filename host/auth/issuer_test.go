package auth_test

import (
	"context"
	"crypto/ecdsa"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
	"time"

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

// TestVerifierPairsWithTheIssuersEvidenceClaimsAndDenylist checks rule 6 of
// the issuer specification's pairing: settings taken from the issuer's
// configuration (authtest.Authentication) read its Evidence-profile tokens
// under its accessTokens.claims names, and refuse a key the issuer lists in
// signing.revokedKeyIds before looking at any key set.
func TestVerifierPairsWithTheIssuersEvidenceClaimsAndDenylist(t *testing.T) {
	priv, _ := issuertest.GenerateKey(t, "ES256")
	is := authtest.StartIssuer(t, issuertest.DevOptions{}, func(dir string) {
		path := filepath.Join(dir, "issuer.yaml")
		raw, err := os.ReadFile(path)
		if err != nil {
			t.Fatal(err)
		}
		conf := strings.Replace(string(raw), "  activePublicJwkFile: keys/active.jwk.json\n",
			"  activePublicJwkFile: keys/active.jwk.json\n  revokedKeyIds: ["+priv.KeyID+"]\n", 1)
		if err := os.WriteFile(path, []byte(conf), 0o644); err != nil {
			t.Fatal(err)
		}
	})
	cfg := is.Authentication()
	if !reflect.DeepEqual(cfg.RevokedKeyIDs, []string{priv.KeyID}) {
		t.Fatalf("revoked key ids %v, want the issuer's", cfg.RevokedKeyIDs)
	}
	v, err := auth.NewVerifier(cfg, nil) // no Start: the first Verify fetches the key set
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	c, err := v.Verify(ctx, is.Token(t, issuertest.EvidenceClientID))
	if err != nil {
		t.Fatalf("evidence token refused: %v", err)
	}
	want := &auth.Evidence{RequesterTags: []string{"dev"}, Audience: "https://evidence.localhost", GrantID: "grant-dev-1", GrantAuthority: "registrum-dev"}
	if !reflect.DeepEqual(c.Evidence, want) || !c.HasScope("dev") || c.Principal != "service:demo-evidence" {
		t.Fatalf("evidence = %+v, claims %+v", c.Evidence, c)
	}
	// The standard client's token is no evidence token.
	if c, err := v.Verify(ctx, is.Token(t, issuertest.StandardClientID)); err != nil || c.Evidence != nil {
		t.Fatalf("standard token: %v %+v", err, c)
	}

	// A token signed with the revoked key is refused as revoked, not as unknown.
	now := time.Now()
	signer := &authtest.Key{KID: priv.KeyID, Private: priv.Key.(*ecdsa.PrivateKey)}
	tok := signer.Sign(t, "at+jwt", map[string]any{"iss": cfg.Issuer, "aud": cfg.Audience, "iat": now.Unix(),
		"exp": now.Add(5 * time.Minute).Unix(), "jti": "revoked-1", "client_id": "c", "sub": "s", "scope": "records:read"})
	if _, err := v.Verify(ctx, tok); err == nil {
		t.Fatal("a token of a revoked key was accepted")
	} else if re, ok := auth.IsRefused(err); !ok || re.Reason != auth.ReasonKeyRevoked {
		t.Fatalf("revoked key: err = %v, want %s", err, auth.ReasonKeyRevoked)
	}
}
