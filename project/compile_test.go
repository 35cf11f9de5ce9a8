package project

import (
	"bytes"
	"errors"
	"flag"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/registrum/registrum/model"
)

var update = flag.Bool("update", false, "rewrite the expected findings of testdata/broken")

// TestBrokenProjects compiles every project under testdata/broken: each
// breaks one rule and must be refused with exactly the findings in its
// expect.txt (file:line:column: key.path: message [rule]).
func TestBrokenProjects(t *testing.T) {
	dirs, err := filepath.Glob("testdata/broken/*")
	if err != nil {
		t.Fatal(err)
	}
	if len(dirs) == 0 {
		t.Fatal("no broken projects found")
	}
	for _, dir := range dirs {
		t.Run(filepath.Base(dir), func(t *testing.T) {
			production := false
			if _, err := os.Stat(filepath.Join(dir, "production")); err == nil {
				production = true
			}
			_, err := Compile(dir, opts(production))
			var fs Findings
			if !errors.As(err, &fs) {
				t.Fatalf("Compile() error = %v, want findings", err)
			}
			var got strings.Builder
			for _, f := range fs {
				got.WriteString(f.String() + "\n")
			}
			expectFile := filepath.Join(dir, "expect.txt")
			if *update {
				if err := os.WriteFile(expectFile, []byte(got.String()), 0o644); err != nil {
					t.Fatal(err)
				}
				return
			}
			want, err := os.ReadFile(expectFile)
			if err != nil {
				t.Fatal(err)
			}
			if got.String() != string(want) {
				t.Errorf("findings differ\n got:\n%s\nwant:\n%s", got.String(), want)
			}
			// The rule named by the folder is among the findings.
			rule := strings.SplitN(filepath.Base(dir), "--", 2)[0]
			if !strings.Contains(got.String(), "["+rule+"]") {
				t.Errorf("no finding for rule %s", rule)
			}
		})
	}
}

func compileOK(t *testing.T, dir string, opts Options) *Result {
	t.Helper()
	r, err := Compile(dir, opts)
	if err != nil {
		t.Fatalf("Compile(%s) = %v", dir, err)
	}
	return r
}

func TestMinimalProjectCompilesAndLoads(t *testing.T) {
	r := compileOK(t, "testdata/minimal", opts(false))
	out := filepath.Join(t.TempDir(), "pkg")
	if err := r.Write(out); err != nil {
		t.Fatal(err)
	}
	p, err := model.Load(out)
	if err != nil {
		t.Fatalf("model.Load: %v", err)
	}
	if p.Revision != r.Package.Revision || !strings.HasPrefix(p.Revision, "sha256:") || !strings.HasPrefix(p.SchemaFingerprint, "sha256:") {
		t.Fatalf("revision %q fingerprint %q", p.Revision, p.SchemaFingerprint)
	}
	e := p.EntityByRoute("parcels")
	if e == nil || e.Field("parcel-code").APIName != "parcelCode" || !e.Field("parcel-code").Required || e.Field("area").Nullable() == false {
		t.Fatalf("entity not resolved as authored: %+v", e)
	}
	if len(e.Constraints) != 1 || e.Constraints[0].Kind != model.ConstraintUnique || e.Constraints[0].ID != "parcel-code-unique" {
		t.Fatalf("constraints = %+v", e.Constraints)
	}
	roles := map[string]string{}
	for _, f := range p.Files {
		roles[f.Path] = f.Role
	}
	for path, role := range map[string]string{"source/registry.yaml": "source", "openapi.json": "openapi", "schemas/parcel.schema.json": "entity-schema"} {
		if roles[path] != role {
			t.Errorf("file %s has role %q, want %q (files %v)", path, roles[path], role, roles)
		}
	}
	// A file changed after compilation is detected by the loader.
	if err := os.WriteFile(filepath.Join(out, "openapi.json"), []byte("{}"), 0o644); err != nil {
		t.Fatal(err)
	}
	if _, err := model.Load(out); err == nil {
		t.Fatal("model.Load accepted a modified generated file")
	}
}

// readTree returns every file under dir keyed by relative path.
func readTree(t *testing.T, dir string) map[string][]byte {
	t.Helper()
	out := map[string][]byte{}
	err := filepath.WalkDir(dir, func(path string, d os.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		b, err := os.ReadFile(path)
		rel, _ := filepath.Rel(dir, path)
		out[rel] = b
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	return out
}

func TestCompilingTwiceGivesIdenticalBytes(t *testing.T) {
	for _, dir := range []string{"testdata/minimal", "testdata/request", "testdata/full", "../examples/childsupport"} {
		t.Run(dir, func(t *testing.T) {
			if _, err := os.Stat(dir); err != nil {
				t.Fatalf("project %s: %v", dir, err)
			}
			a, b := filepath.Join(t.TempDir(), "a"), filepath.Join(t.TempDir(), "b")
			ra := compileOK(t, dir, opts(false))
			rb := compileOK(t, dir, opts(false))
			if err := ra.Write(a); err != nil {
				t.Fatal(err)
			}
			if err := rb.Write(b); err != nil {
				t.Fatal(err)
			}
			ta, tb := readTree(t, a), readTree(t, b)
			if len(ta) != len(tb) {
				t.Fatalf("%d files vs %d", len(ta), len(tb))
			}
			for path, x := range ta {
				if !bytes.Equal(x, tb[path]) {
					t.Errorf("%s differs between two compilations", path)
				}
			}
			if ra.Package.Revision != rb.Package.Revision {
				t.Errorf("revisions differ")
			}
		})
	}
}

// copyProject copies a project folder so a test can change it.
func copyProject(t *testing.T, src string) string {
	t.Helper()
	dst := t.TempDir()
	for rel, b := range readTree(t, src) {
		full := filepath.Join(dst, rel)
		if err := os.MkdirAll(filepath.Dir(full), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(full, b, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	return dst
}

func TestChangingAFieldChangesRevisionAndFingerprint(t *testing.T) {
	before := compileOK(t, "testdata/minimal", opts(false))
	dir := copyProject(t, "testdata/minimal")
	file := filepath.Join(dir, "registry.yaml")
	raw, _ := os.ReadFile(file)
	changed := strings.Replace(string(raw), "maxLength: 32", "maxLength: 40", 1)
	if changed == string(raw) {
		t.Fatal("fixture changed shape")
	}
	if err := os.WriteFile(file, []byte(changed), 0o644); err != nil {
		t.Fatal(err)
	}
	after := compileOK(t, dir, opts(false))
	if after.Package.Revision == before.Package.Revision {
		t.Error("revision did not change")
	}
	if after.Package.SchemaFingerprint == before.Package.SchemaFingerprint {
		t.Error("schema fingerprint did not change")
	}
	// A comment changes the source digest, hence the revision, but not the layout.
	if err := os.WriteFile(file, append(raw, []byte("# note\n")...), 0o644); err != nil {
		t.Fatal(err)
	}
	commented := compileOK(t, dir, opts(false))
	if commented.Package.Revision == before.Package.Revision {
		t.Error("revision ignores the source bytes")
	}
	if commented.Package.SchemaFingerprint != before.Package.SchemaFingerprint {
		t.Error("a comment changed the schema fingerprint")
	}
}

func TestWriteRefusesAFolderThatHoldsNoPackage(t *testing.T) {
	r := compileOK(t, "testdata/minimal", opts(false))
	dir := t.TempDir()
	keep := filepath.Join(dir, "notes.txt")
	if err := os.WriteFile(keep, []byte("mine"), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := r.Write(dir); err == nil {
		t.Fatal("Write overwrote a folder that holds no package")
	}
	if _, err := os.Stat(keep); err != nil {
		t.Fatal("Write changed the folder it refused")
	}
	// An earlier package is replaced as a whole.
	out := filepath.Join(t.TempDir(), "pkg")
	if err := r.Write(out); err != nil {
		t.Fatal(err)
	}
	stale := filepath.Join(out, "stale.json")
	if err := os.WriteFile(stale, nil, 0o644); err != nil {
		t.Fatal(err)
	}
	if err := r.Write(out); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(stale); !errors.Is(err, os.ErrNotExist) {
		t.Fatal("a stale file survived recompilation")
	}
}

func TestProjectFolderNeedsExactlyOneDocument(t *testing.T) {
	dir := t.TempDir()
	if _, err := Compile(dir, opts(false)); err == nil || !strings.Contains(err.Error(), "no project document") {
		t.Fatalf("empty folder: %v", err)
	}
	raw, _ := os.ReadFile("testdata/minimal/registry.yaml")
	os.WriteFile(filepath.Join(dir, "registry.yaml"), raw, 0o644)
	os.WriteFile(filepath.Join(dir, "registry.json"), []byte("{}"), 0o644)
	if _, err := Compile(dir, opts(false)); err == nil || !strings.Contains(err.Error(), "several project documents") {
		t.Fatalf("two documents: %v", err)
	}
}

func TestDeriveAPIName(t *testing.T) {
	for id, want := range map[string]string{"case-id": "caseId", "valid_from": "validFrom", "x": "x", "child-national-id": "childNationalId"} {
		if got := DeriveAPIName(id); got != want {
			t.Errorf("DeriveAPIName(%q) = %q, want %q", id, got, want)
		}
	}
}
