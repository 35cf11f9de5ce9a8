package project

import (
	"errors"
	"testing"

	"github.com/registrum/registrum/internal/canonjson"
	"github.com/registrum/registrum/model"
)

// testFingerprint stands in for the store's layout fingerprint in the
// compiler's own tests (which may not build on the store): a digest of the
// entities, which is all a layout depends on.
func testFingerprint(p *model.Package) (string, error) {
	return canonjson.Digest(p.Entities)
}

// opts are the options of an ordinary test compilation.
func opts(production bool) Options {
	return Options{Production: production, Fingerprint: testFingerprint}
}

func TestCompileNeedsAFingerprintFunction(t *testing.T) {
	if _, err := Compile("testdata/minimal", Options{}); !errors.Is(err, ErrNoFingerprint) {
		t.Fatalf("Compile without Fingerprint = %v, want ErrNoFingerprint", err)
	}
}

func TestCompileRecordsTheFingerprintItIsHanded(t *testing.T) {
	r := compileOK(t, "testdata/minimal", Options{Fingerprint: func(*model.Package) (string, error) { return "sha256:feed", nil }})
	if r.Package.SchemaFingerprint != "sha256:feed" {
		t.Fatalf("schema fingerprint %q", r.Package.SchemaFingerprint)
	}
	boom := errors.New("boom")
	_, err := Compile("testdata/minimal", Options{Fingerprint: func(*model.Package) (string, error) { return "", boom }})
	if !errors.Is(err, boom) {
		t.Fatalf("Compile with a failing Fingerprint = %v", err)
	}
}
