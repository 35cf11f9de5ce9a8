package verifier_test

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/registrum/registrum/plugins/verifier"
)

func TestVerifyFile(t *testing.T) {
	p := newProcess(t, "eicar-verifier")
	dir := t.TempDir()
	clean := filepath.Join(dir, "clean.pdf")
	dirty := filepath.Join(dir, "dirty.pdf")
	empty := filepath.Join(dir, "empty.pdf")
	os.WriteFile(clean, filler(200<<10), 0o644)
	os.WriteFile(dirty, append(filler(200<<10), eicar()...), 0o644)
	os.WriteFile(empty, nil, 0o644)
	ctx := context.Background()
	if v, err := verifier.VerifyFile(ctx, p, "evidence", "application/pdf", clean); err != nil || v.Outcome != verifier.Approved {
		t.Fatalf("clean: %+v, %v", v, err)
	}
	if v, err := verifier.VerifyFile(ctx, p, "evidence", "application/pdf", dirty); err != nil || v.Outcome != verifier.Rejected {
		t.Fatalf("dirty: %+v, %v", v, err)
	}
	if _, err := verifier.VerifyFile(ctx, p, "evidence", "application/pdf", empty); err == nil || !strings.Contains(err.Error(), "declaredSize") {
		t.Fatalf("empty: %v", err)
	}
	if _, err := verifier.VerifyFile(ctx, p, "evidence", "PDF", clean); err == nil || !strings.Contains(err.Error(), "mediaType") {
		t.Fatalf("bad media type: %v", err)
	}
	if _, err := verifier.VerifyFile(ctx, p, "evidence", "application/pdf", filepath.Join(dir, "nope")); err == nil || !strings.Contains(err.Error(), "nope") {
		t.Fatalf("missing: %v", err)
	}
}
