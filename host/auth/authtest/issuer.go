package authtest

import (
	"context"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"testing"

	jose "github.com/go-jose/go-jose/v4"

	"github.com/registrum/registrum/issuer"
	"github.com/registrum/registrum/sdk/tokensource"
)

// Issuer is a real token issuer (the dev deployment of package issuer)
// served in process over loopback HTTP until the test ends.
type Issuer struct {
	// Setup is the written deployment; Config its loaded configuration.
	Setup  *issuer.DevSetup
	Config *issuer.Config
	// BaseURL is the listener's http URL; JWKSURL its published key set.
	BaseURL, JWKSURL string
}

// StartIssuer writes a dev deployment with opts (its port is chosen here),
// lets edit change its files (nil: none), then loads and serves it.
func StartIssuer(t testing.TB, opts issuer.DevOptions, edit func(dir string)) *Issuer {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	opts.Port = ln.Addr().(*net.TCPAddr).Port
	setup, err := issuer.WriteDevSetup(t.TempDir(), opts)
	if err != nil {
		ln.Close()
		t.Fatal(err)
	}
	if edit != nil {
		edit(filepath.Dir(setup.ConfigPath))
	}
	cfg, err := issuer.LoadConfig(setup.ConfigPath)
	if err != nil {
		ln.Close()
		t.Fatal(err)
	}
	srv, err := issuer.New(cfg, nil)
	if err != nil {
		ln.Close()
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
	base := "http://" + ln.Addr().String()
	return &Issuer{Setup: setup, Config: cfg, BaseURL: base, JWKSURL: base + cfg.Signing.JWKSPath}
}

// Token obtains an access token for the named demo client through
// sdk/tokensource, as a real client would.
func (is *Issuer) Token(t testing.TB, clientID string) string {
	t.Helper()
	for _, c := range is.Setup.Clients {
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
		src, err := tokensource.New(tokensource.Config{TokenURL: is.Setup.TokenURL, ClientID: c.ID, Key: &k, Audience: c.Audience})
		if err != nil {
			t.Fatal(err)
		}
		tok, err := src.Token(context.Background())
		if err != nil {
			t.Fatal(err)
		}
		return tok.AccessToken
	}
	t.Fatalf("authtest: the dev issuer has no client %q", clientID)
	return ""
}

// HostAuthentication returns the record host's `authentication` settings
// (one YAML line) that trust this issuer: its issuer id, key set and audience,
// scopes in "scope" split on spaces, and the purpose in claim "purpose".
func (is *Issuer) HostAuthentication() string {
	return fmt.Sprintf("authentication: {issuer: %q, jwksUrl: %q, audience: %q, scopeClaim: scope, scopeSeparator: ' ', authorityClaims: {purpose: purpose}}\n",
		is.Config.Issuer, is.JWKSURL, is.Config.AccessTokens.Audiences[0])
}
