// Package issuertest runs a real token issuer in a test: the dev deployment
// of package issuer, served in process over loopback HTTP until the test
// ends, and hands out tokens for its demo clients as a real client would get
// them (through sdk/tokensource).
//
// It is the one way tests of other services reach the issuer: the project's
// architecture test lets the tests of the record host and of the SDK import
// this package, never package issuer itself.
package issuertest

import (
	"context"
	"net"
	"net/http"
	"path/filepath"
	"testing"
	"time"

	jose "github.com/go-jose/go-jose/v4"

	"github.com/registrum/registrum/issuer"
	"github.com/registrum/registrum/issuer/keys"
	"github.com/registrum/registrum/sdk/tokensource"
)

// DevOptions are the dev deployment's options (scopes, claims, …); the
// listener's port is always chosen by Start.
type DevOptions = issuer.DevOptions

// DevSetup is the written dev deployment: its files, clients and URLs.
type DevSetup = issuer.DevSetup

// DevClient is one client of the dev deployment.
type DevClient = issuer.DevClient

// The demo clients of the dev deployment.
const (
	StandardClientID = issuer.DevStandardClientID
	EvidenceClientID = issuer.DevEvidenceClientID
)

// Options says how to start the issuer. The zero value starts the dev
// deployment with its defaults.
type Options struct {
	// Dev are the dev deployment's options.
	Dev DevOptions
	// Edit, when set, may change the deployment's files in dir before they
	// are loaded.
	Edit func(dir string)
	// Clock, when set, is the issuer's clock.
	Clock func() time.Time
	// Wrap, when set, wraps the issuer's HTTP handler (to count or alter
	// requests); the issuer is then served by a plain http.Server.
	Wrap func(http.Handler) http.Handler
}

// Issuer is a started issuer.
type Issuer struct {
	// Setup is the written deployment; Config its loaded configuration.
	Setup  *DevSetup
	Config *issuer.Config
	// BaseURL is the listener's http URL; JWKSURL its published key set.
	BaseURL, JWKSURL string
}

// Start writes a dev deployment, loads it and serves it until t ends; it
// fails the test on any error.
func Start(t testing.TB, o Options) *Issuer {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	started := false
	defer func() {
		if !started {
			ln.Close()
		}
	}()
	o.Dev.Port = ln.Addr().(*net.TCPAddr).Port
	setup, err := issuer.WriteDevSetup(t.TempDir(), o.Dev)
	if err != nil {
		t.Fatal(err)
	}
	if o.Edit != nil {
		o.Edit(filepath.Dir(setup.ConfigPath))
	}
	cfg, err := issuer.LoadConfig(setup.ConfigPath)
	if err != nil {
		t.Fatal(err)
	}
	// As in `registrum dev`: the identifier stays https, the discovery
	// documents name the loopback listener really served
	// (docs/decisions/dev-issuer-scheme.md).
	cfg.EndpointBaseURL = "http://" + ln.Addr().String()
	var opts []issuer.Option
	if o.Clock != nil {
		opts = append(opts, issuer.WithClock(o.Clock))
	}
	srv, err := issuer.New(cfg, nil, opts...)
	if err != nil {
		t.Fatal(err)
	}
	started = true
	if o.Wrap != nil {
		hs := &http.Server{Handler: o.Wrap(srv.Handler()), ReadHeaderTimeout: 10 * time.Second}
		go hs.Serve(ln)
		t.Cleanup(func() {
			hs.Close()
			srv.Close()
		})
	} else {
		ctx, cancel := context.WithCancel(context.Background())
		done := make(chan error, 1)
		go func() { done <- srv.Serve(ctx, ln) }()
		t.Cleanup(func() {
			cancel()
			<-done
			srv.Close()
		})
	}
	base := "http://" + ln.Addr().String()
	return &Issuer{Setup: setup, Config: cfg, BaseURL: base, JWKSURL: base + cfg.Signing.JWKSPath}
}

// Source returns a token source for the named demo client, configured as a
// real client of this issuer would be; mutate (nil: none) may change its
// configuration first.
func (is *Issuer) Source(t testing.TB, clientID string, mutate func(*tokensource.Config)) *tokensource.Source {
	t.Helper()
	for _, c := range is.Setup.Clients {
		if c.ID != clientID {
			continue
		}
		key, err := tokensource.LoadKeyFile(c.KeyFile)
		if err != nil {
			t.Fatal(err)
		}
		// The token URL only, as `registrum dev` prints it: the source learns
		// the assertion audience (the issuer identifier) by discovery.
		cfg := tokensource.Config{TokenURL: is.Setup.TokenURL, ClientID: c.ID, Key: key}
		if mutate != nil {
			mutate(&cfg)
		}
		src, err := tokensource.New(cfg)
		if err != nil {
			t.Fatal(err)
		}
		return src
	}
	t.Fatalf("issuertest: the dev issuer has no client %q", clientID)
	return nil
}

// Token obtains an access token for the named demo client.
func (is *Issuer) Token(t testing.TB, clientID string) string {
	t.Helper()
	tok, err := is.Source(t, clientID, nil).Token(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	return tok.AccessToken
}

// GenerateKey returns a new private JWK and its public half for alg (ES256
// or EdDSA), as the issuer's key tooling makes them; it fails the test on
// error.
func GenerateKey(t testing.TB, alg string) (private, public *jose.JSONWebKey) {
	t.Helper()
	private, public, err := keys.Generate(alg)
	if err != nil {
		t.Fatal(err)
	}
	return private, public
}
