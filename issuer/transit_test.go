package issuer

import (
	"net/http"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/registrum/registrum/issuer/signer/transittest"
)

// useTransit turns a dev setup into a strict deployment signing through ts.
func useTransit(t *testing.T, ts *transittest.Server, version int) func(dir string) {
	return func(dir string) {
		jwk := ts.WritePublicJWK(filepath.Join(dir, "keys"), version)
		p := filepath.Join(dir, "issuer.yaml")
		raw, _ := os.ReadFile(p)
		s := strings.Replace(string(raw), "validationMode: supervised-local-development", "validationMode: strict", 1)
		s = regexp.MustCompile(`(?m)^endpointBaseUrl: .*\n`).ReplaceAllString(s, "")
		s = strings.Replace(s, "activePublicJwkFile: keys/active.jwk.json", "activePublicJwkFile: "+jwk, 1)
		s = strings.Replace(s, "  kind: local-jwk\n  privateKeyRef: secret:file/signing-key.jwk\n",
			"  kind: transit\n  unixSocketPath: "+ts.SocketPath()+"\n  mount: "+ts.Mount()+"\n  keyName: "+ts.KeyName()+"\n  keyVersion: 1\n  timeoutMilliseconds: 500\n", 1)
		if err := os.WriteFile(p, []byte(s), 0o644); err != nil {
			t.Fatal(err)
		}
	}
}

func TestStrictDeploymentWithTransit(t *testing.T) {
	ts := transittest.Start(t)
	d := startDeployment(t, useTransit(t, ts, 1), WithSelfTestInterval(100*time.Millisecond))
	if d.cfg.ValidationMode != ModeStrict || d.cfg.Signer.Kind != SignerTransit {
		t.Fatalf("mode %s signer %s", d.cfg.ValidationMode, d.cfg.Signer.Kind)
	}
	body, header, _ := d.issue(DevStandardClientID, nil)
	if header["kid"] != d.cfg.Signing.Active.KeyID {
		t.Fatalf("kid %v", header["kid"])
	}
	verifyWithJWKS(t, d, body["access_token"].(string))

	// The provider goes away: no token, not ready.
	ts.SetUnavailable(true)
	expectError(t, d.post(formBody(d.assertion(DevStandardClientID, d.keys[DevStandardClientID], nil))), http.StatusInternalServerError, ErrorServerError)
	if r := d.get("/ready"); r.status != http.StatusServiceUnavailable {
		t.Fatalf("ready with the provider down: %d", r.status)
	}
	// It comes back: the self-test makes the issuer ready with no token traffic.
	ts.SetUnavailable(false)
	deadline := time.Now().Add(10 * time.Second)
	for d.get("/ready").status != http.StatusOK {
		if time.Now().After(deadline) {
			t.Fatal("readiness did not recover")
		}
		time.Sleep(50 * time.Millisecond)
	}
	d.issue(DevStandardClientID, nil)
}

func TestTransitKeyMismatchRefusesStart(t *testing.T) {
	ts := transittest.Start(t, transittest.WithVersions(2))
	setup, _ := newSetup(t)
	dir := filepath.Dir(setup.ConfigPath)
	useTransit(t, ts, 2)(dir) // active JWK of version 2, keyVersion pinned to 1
	cfg, err := LoadConfig(setup.ConfigPath)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := New(cfg, nil); err == nil || !strings.Contains(err.Error(), "self-test") {
		t.Fatalf("start with a mismatched transit key: %v", err)
	}
}
