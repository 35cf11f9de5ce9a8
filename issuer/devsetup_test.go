package issuer

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/registrum/registrum/issuer/keys"
	"github.com/registrum/registrum/issuer/signer"
)

func TestWriteDevSetupKeepsKeys(t *testing.T) {
	dir := t.TempDir()
	first, err := WriteDevSetup(dir, DevOptions{Port: 18443})
	if err != nil {
		t.Fatal(err)
	}
	files := []string{"secrets/signing-key.jwk", "secrets/audit-hash-key", "keys/active.jwk.json", "client-keys/demo-standard.jwk", "client-keys/demo-evidence.jwk"}
	before := map[string]string{}
	for _, f := range files {
		raw, err := os.ReadFile(filepath.Join(dir, f))
		if err != nil {
			t.Fatal(err)
		}
		before[f] = string(raw)
	}
	for _, f := range []string{"secrets/signing-key.jwk", "secrets/audit-hash-key", "client-keys/demo-standard.jwk"} {
		st, _ := os.Stat(filepath.Join(dir, f))
		if st.Mode().Perm() != 0o600 {
			t.Errorf("%s mode %04o", f, st.Mode().Perm())
		}
	}
	for _, f := range []string{"secrets", "audit", "client-keys"} {
		st, _ := os.Stat(filepath.Join(dir, f))
		if st.Mode().Perm() != 0o700 {
			t.Errorf("%s mode %04o", f, st.Mode().Perm())
		}
	}
	// Written again on another port: keys kept, configuration follows the port.
	second, err := WriteDevSetup(dir, DevOptions{Port: 18444})
	if err != nil {
		t.Fatal(err)
	}
	for _, f := range files {
		raw, _ := os.ReadFile(filepath.Join(dir, f))
		if string(raw) != before[f] {
			t.Errorf("%s changed on the second run", f)
		}
	}
	if first.ConfigPath != second.ConfigPath || second.TokenURL != "http://127.0.0.1:18444/token" || len(second.Clients) != 2 {
		t.Fatalf("second setup %+v", second)
	}
	cfg, err := LoadConfig(second.ConfigPath)
	if err != nil {
		t.Fatal(err)
	}
	if cfg.Listener.Port != 18444 || cfg.ValidationMode != ModeSupervisedLocalDevelopment {
		t.Fatalf("config %+v", cfg)
	}
	// The assertion audience is the issuer identifier, what current OAuth
	// clients send (docs/decisions/client-assertion-audience.md); the
	// discovery documents name the http listener really served.
	if second.Issuer != "https://localhost:18444" || cfg.Issuer != second.Issuer || cfg.ClientAssertion.Audience != second.Issuer || cfg.EndpointBaseURL != "http://127.0.0.1:18444" {
		t.Fatalf("issuer %q, clientAssertion.audience %q, endpointBaseUrl %q", cfg.Issuer, cfg.ClientAssertion.Audience, cfg.EndpointBaseURL)
	}
	for _, c := range second.Clients {
		if c.Audience != second.Issuer {
			t.Fatalf("client %s audience %q, want the issuer identifier", c.ID, c.Audience)
		}
	}
	if _, err := LoadRegistry(cfg); err != nil {
		t.Fatal(err)
	}
	// The claim names a record host copies are the ones the issuer loads.
	if cfg.AccessTokens.Claims == nil || *cfg.AccessTokens.Claims != DevEvidenceClaims {
		t.Fatalf("accessTokens.claims %+v, want DevEvidenceClaims", cfg.AccessTokens.Claims)
	}
	if _, err := WriteDevSetup(t.TempDir(), DevOptions{}); err == nil {
		t.Fatal("port 0 accepted")
	}
	if _, err := WriteDevSetup(t.TempDir(), DevOptions{Port: 1, Address: "localhost"}); err == nil {
		t.Fatal("non-IP address accepted")
	}
}

func TestWithSignerMustMatchTheActiveKey(t *testing.T) {
	setup, _ := newSetup(t)
	cfg, err := LoadConfig(setup.ConfigPath)
	if err != nil {
		t.Fatal(err)
	}
	priv, _ := os.ReadFile(filepath.Join(filepath.Dir(setup.ConfigPath), "secrets", "signing-key.jwk"))
	own, err := signer.NewLocalJWK(priv, cfg.Signing.Active)
	if err != nil {
		t.Fatal(err)
	}
	srv, err := New(cfg, nil, WithSigner(own))
	if err != nil {
		t.Fatal(err)
	}
	srv.Close()
	// A signer for another key is refused.
	otherPriv, otherPub, _ := keys.Generate("ES256")
	raw, _ := otherPriv.MarshalJSON()
	other, err := signer.NewLocalJWK(raw, otherPub)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := New(cfg, nil, WithSigner(other)); err == nil || !strings.Contains(err.Error(), "activePublicJwkFile") {
		t.Fatalf("mismatched signer: %v", err)
	}
}
