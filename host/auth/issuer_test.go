package auth_test

import (
	"context"
	"net"
	"os"
	"strings"
	"testing"

	jose "github.com/go-jose/go-jose/v4"

	"github.com/registrum/registrum/host/auth"
	"github.com/registrum/registrum/host/config"
	"github.com/registrum/registrum/issuer"
	"github.com/registrum/registrum/sdk/tokensource"
)

// devIssuer serves a real issuer dev deployment on loopback and returns its
// base URL, its setup and its configuration.
func devIssuer(t *testing.T) (string, *issuer.DevSetup, *issuer.Config) {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	setup, err := issuer.WriteDevSetup(t.TempDir(), issuer.DevOptions{Port: ln.Addr().(*net.TCPAddr).Port})
	if err != nil {
		t.Fatal(err)
	}
	cfg, err := issuer.LoadConfig(setup.ConfigPath)
	if err != nil {
		t.Fatal(err)
	}
	srv, err := issuer.New(cfg, nil)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- srv.Serve(ctx, ln) }()
	t.Cleanup(func() {
		cancel()
		<-done
		srv.Close()
	})
	return "http://" + ln.Addr().String(), setup, cfg
}

func issuedToken(t *testing.T, setup *issuer.DevSetup, clientID string) string {
	t.Helper()
	for _, c := range setup.Clients {
		if c.ID != clientID {
			continue
		}
		raw, err := os.ReadFile(c.KeyFile)
		if err != nil {
			t.Fatal(err)
		}
		var k jose.JSONWebKey
		if err := k.UnmarshalJSON(raw); err != nil {
			t.Fatal(err)
		}
		src, err := tokensource.New(tokensource.Config{TokenURL: setup.TokenURL, ClientID: c.ID, Key: &k, Audience: c.Audience})
		if err != nil {
			t.Fatal(err)
		}
		tok, err := src.Token(context.Background())
		if err != nil {
			t.Fatal(err)
		}
		return tok.AccessToken
	}
	t.Fatalf("no client %q", clientID)
	return ""
}

func ip(v int) *int { return &v }

func TestVerifiesTokensOfTheRealIssuer(t *testing.T) {
	base, setup, icfg := devIssuer(t)
	cfg := &config.Authentication{
		Issuer: icfg.Issuer, JWKSURL: base + "/.well-known/jwks.json", Audience: "urn:registrum:dev",
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

	c, err := v.Verify(ctx, issuedToken(t, setup, issuer.DevStandardClientID))
	if err != nil {
		t.Fatalf("standard token refused: %v", err)
	}
	if !c.HasScope("records:read") || !c.HasScope("records:write") || c.Principal != "service:demo-standard" || c.Purpose != "local-development" || c.TokenID == "" {
		t.Fatalf("claims = %+v", c)
	}
	// An evidence token verifies too; it carries no scope claim, so no scopes.
	ev, err := v.Verify(ctx, issuedToken(t, setup, issuer.DevEvidenceClientID))
	if err != nil {
		t.Fatalf("evidence token refused: %v", err)
	}
	if len(ev.Scopes) != 0 || ev.Principal != "service:demo-evidence" {
		t.Fatalf("evidence claims = %+v", ev)
	}

	// Another deployment's audience, and the issuer's key revoked by configuration.
	tok := issuedToken(t, setup, issuer.DevStandardClientID)
	for name, edit := range map[string]func(*config.Authentication){
		"audience": func(c *config.Authentication) { c.Audience = "urn:registrum:other" },
		"issuer":   func(c *config.Authentication) { c.Issuer = strings.Replace(c.Issuer, "localhost", "example.org", 1) },
		"revoked":  func(c *config.Authentication) { c.RevokedKeyIDs = []string{icfg.Signing.Active.KeyID} },
	} {
		other := *cfg
		edit(&other)
		v2, err := auth.NewVerifier(&other, nil)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := v2.Verify(ctx, tok); err == nil {
			t.Fatalf("%s: a token for another configuration was accepted", name)
		} else if _, ok := auth.IsRefused(err); !ok {
			t.Fatalf("%s: err = %v, want a refusal", name, err)
		}
	}
}
