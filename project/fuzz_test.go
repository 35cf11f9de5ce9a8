package project

import (
	"errors"
	"os"
	"path/filepath"
	"testing"
)

// FuzzCompileDocument: any document is either compiled or refused with
// findings; the compiler never panics and never fails without saying where.
func FuzzCompileDocument(f *testing.F) {
	for _, p := range []string{"testdata/minimal", "testdata/request", "testdata/full", "../examples/childsupport"} {
		b, err := os.ReadFile(filepath.Join(p, "registry.yaml"))
		if err != nil {
			f.Fatal(err)
		}
		f.Add(b)
	}
	f.Add([]byte(`{"format":"registrum.project/v1"}`))
	f.Add([]byte("- a\n- b\n"))
	f.Fuzz(func(t *testing.T, doc []byte) {
		r, err := compileDocument("testdata/full", "registry.yaml", doc, opts(false))
		var fs Findings
		switch {
		case err == nil:
			if r.Package.Revision == "" {
				t.Fatal("compiled package without revision")
			}
		case errors.As(err, &fs):
			for _, f := range fs {
				if f.Line < 1 || f.Column < 1 || f.Rule == "" || f.Message == "" {
					t.Fatalf("finding without location or rule: %+v", f)
				}
			}
		default:
			// Only generator or layout faults surface as plain errors; they
			// must still be errors, not panics.
		}
	})
}
