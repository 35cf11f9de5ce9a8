package dev

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/registrum/registrum/examples/plugins/eicar-verifier/eicar"
	"github.com/registrum/registrum/model"
	hostverifier "github.com/registrum/registrum/plugins/verifier"
	"github.com/registrum/registrum/project"
	"github.com/registrum/registrum/store/layout"
)

// TestScannerServesTheExamplesHTTPVerifier: dev points the example's http
// verifier at the port it listens on (the written package still loads,
// its revision recomputed), writes an owner-only credential once, and the
// host's own http verifier client gets approved for a letter and rejected
// for the EICAR test string from it.
func TestScannerServesTheExamplesHTTPVerifier(t *testing.T) {
	res, err := project.Compile("../../../../examples/childsupport", project.Options{Fingerprint: layout.Fingerprint})
	if err != nil {
		t.Fatal(err)
	}
	if len(res.Package.Verifiers) != 1 || !devServed(res.Package.Verifiers[0]) || res.Package.Verifiers[0].Endpoint != "http://127.0.0.1:8083/v1/verify" {
		t.Fatalf("the example's verifiers: %+v", res.Package.Verifiers)
	}
	data := t.TempDir()
	sc, err := startScanner(res.Package, data, 0)
	if err != nil || sc == nil {
		t.Fatalf("startScanner: %v %v", sc, err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- sc.serve(ctx) }()
	defer func() {
		cancel()
		if err := <-done; err != nil {
			t.Error(err)
		}
	}()
	v := res.Package.Verifiers[0]
	if v.Endpoint != "http://"+sc.Addr()+"/v1/verify" || strings.Join(sc.IDs, ",") != "eicar-scanner" {
		t.Fatalf("endpoint %s, scanner on %s serving %v", v.Endpoint, sc.Addr(), sc.IDs)
	}
	if err := res.Write(filepath.Join(data, "package")); err != nil {
		t.Fatal(err)
	}
	if p, err := model.Load(filepath.Join(data, "package")); err != nil || p.Verifiers[0].Endpoint != v.Endpoint {
		t.Fatalf("the written package: %v", err)
	}
	cred := filepath.Join(data, "secrets", "eicar-scanner-token")
	fi, err := os.Stat(cred)
	if err != nil || fi.Mode().Perm() != 0o600 || fi.Size() < 32 {
		t.Fatalf("credential file: %v %v", fi, err)
	}
	first, _ := os.ReadFile(cred)

	h, err := hostverifier.NewHTTP(hostverifier.HTTPConfig{ID: v.ID, Endpoint: v.Endpoint, SecretRoot: filepath.Join(data, "secrets"), CredentialRef: v.AuthorizationRef})
	if err != nil {
		t.Fatal(err)
	}
	defer h.Close()
	for content, want := range map[string]hostverifier.Outcome{journeyAttachment: hostverifier.Approved, "before " + string(eicar.Signature()) + " after": hostverifier.Rejected} {
		sum := sha256.Sum256([]byte(content))
		att := hostverifier.Attachment{SlotID: "supporting-document", MediaType: "text/plain", DeclaredSize: int64(len(content)), SHA256: hex.EncodeToString(sum[:])}
		got, err := h.Verify(context.Background(), att, strings.NewReader(content))
		if err != nil || got.Outcome != want {
			t.Errorf("%.20q: %+v %v, want %s", content, got, err, want)
		}
	}

	// A second start keeps the credential.
	res2, _ := project.Compile("../../../../examples/childsupport", project.Options{Fingerprint: layout.Fingerprint})
	sc2, err := startScanner(res2.Package, data, 0)
	if err != nil {
		t.Fatal(err)
	}
	sc2.ln.Close()
	if again, _ := os.ReadFile(cred); string(again) != string(first) {
		t.Error("the credential changed on a second start")
	}
}

// An https or non-loopback endpoint is someone else's scanner: dev serves
// only plain-http loopback ones, and without one it starts nothing.
func TestScannerServesOnlyLoopbackHTTPVerifiers(t *testing.T) {
	for endpoint, want := range map[string]bool{
		"http://127.0.0.1:8083/v1/verify": true, "http://localhost:9/x": true, "http://[::1]:9/": true,
		"https://127.0.0.1:8083/v1/verify": false, "https://scanner.internal/v1/scan": false, "http://10.0.0.1/scan": false,
	} {
		if got := devServed(model.Verifier{ID: "s", Kind: model.VerifierHTTP, Endpoint: endpoint}); got != want {
			t.Errorf("%s: served %v", endpoint, got)
		}
	}
	if devServed(model.Verifier{ID: "s", Kind: model.VerifierGoPlugin, Path: "verifiers/x"}) {
		t.Error("a go-plugin verifier served by dev")
	}
	p := &model.Package{Verifiers: []model.Verifier{{ID: "remote", Kind: model.VerifierHTTP, Endpoint: "https://scanner.internal/v1/scan", AuthorizationRef: "secret:file/t"}}}
	if sc, err := startScanner(p, t.TempDir(), 0); sc != nil || err != nil {
		t.Fatalf("startScanner without a loopback verifier: %v %v", sc, err)
	}
}
