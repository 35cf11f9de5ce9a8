package project

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestLimitsAtTheirEdges: each bound accepts its edge value and refuses the
// next one, with a finding at the key.
func TestLimitsAtTheirEdges(t *testing.T) {
	base := minimal(t)
	request, err := os.ReadFile("testdata/request/registry.yaml")
	if err != nil {
		t.Fatal(err)
	}
	slots := func(n int) string {
		var b strings.Builder
		for i := 0; i < n; i++ {
			id := fmt.Sprintf("s%d", i)
			if i == 0 {
				id = "deed" // the slot the grants name
			}
			fmt.Fprintf(&b, "      - {id: %s, maximumBytes: 16777216, contentTypes: [text/plain]}\n", id)
		}
		return strings.Replace(string(request), "      - {id: deed, required: true, maximumBytes: 1048576, contentTypes: [application/pdf]}\n", b.String(), 1)
	}
	entity := func(extra string) string {
		return strings.Replace(base, "    dataset: land\n", "    dataset: land\n"+extra, 1)
	}
	field := func(def string) string {
		return strings.Replace(base, "      - {id: surveyed, type: boolean}", "      - {id: surveyed, type: boolean}\n      - "+def, 1)
	}
	long := func(n int) string { return "e" + strings.Repeat("x", n-1) }
	cases := []struct {
		name    string
		ok, bad string
		path    string
	}{
		{"batch items", entity("    batch: {maximumItems: 1000, maximumBytes: 1048576}\n"), entity("    batch: {maximumItems: 1001, maximumBytes: 1048576}\n"), "entities[0].batch.maximumItems"},
		{"batch bytes", entity("    batch: {maximumItems: 1, maximumBytes: 16777216}\n"), entity("    batch: {maximumItems: 1, maximumBytes: 16777217}\n"), "entities[0].batch.maximumBytes"},
		{"attachment slots", slots(8), slots(9), "entities[1].attachments"},
		{"string length", field("{id: code, type: string, maxLength: 1000000}"), field("{id: code, type: string, maxLength: 1000001}"), "entities[0].fields[3].maxLength"},
		{"decimal precision", field("{id: amount, type: decimal, precision: 38, scale: 38}"), field("{id: amount, type: decimal, precision: 39, scale: 2}"), "entities[0].fields[3].precision"},
		{"cursor age", entity("    cursor: {maxAgeSeconds: 604800}\n"), entity("    cursor: {maxAgeSeconds: 604801}\n"), "entities[0].cursor.maxAgeSeconds"},
		{"body bytes", entity("    maximumBodyBytes: 16777216\n"), entity("    maximumBodyBytes: 16777217\n"), "entities[0].maximumBodyBytes"},
		{"identifier length", renameEntity(base, long(64)), renameEntity(base, long(65)), "entities[0].id"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			if _, fs := compileText(t, tc.ok, opts(false)); fs != nil {
				t.Fatalf("edge value refused: %v", fs)
			}
			_, fs := compileText(t, tc.bad, opts(false))
			if len(fs) == 0 {
				t.Fatal("value past the edge accepted")
			}
			found := false
			for _, f := range fs {
				found = found || f.Path == tc.path
			}
			if !found {
				t.Fatalf("no finding at %s: %v", tc.path, fs)
			}
		})
	}
}

// renameEntity gives the minimal project's entity another id.
func renameEntity(doc, id string) string {
	doc = strings.Replace(doc, "  - id: parcel\n", "  - id: "+id+"\n", 1)
	return strings.Replace(doc, "entity: parcel\n", "entity: "+id+"\n", 1)
}

func TestProjectDocumentSizeLimit(t *testing.T) {
	base := minimal(t)
	pad := func(total int) []byte {
		b := []byte(base)
		for len(b) < total {
			line := "# " + strings.Repeat("p", 77) + "\n"
			if rest := total - len(b); rest < len(line) {
				line = "#" + strings.Repeat("p", rest-2) + "\n"
			}
			b = append(b, line...)
		}
		return b
	}
	dir := t.TempDir()
	file := filepath.Join(dir, "registry.yaml")
	if err := os.WriteFile(file, pad(MaxProjectBytes), 0o644); err != nil {
		t.Fatal(err)
	}
	if _, err := Compile(dir, opts(false)); err != nil {
		t.Fatalf("document of exactly %d bytes refused: %v", MaxProjectBytes, err)
	}
	if err := os.WriteFile(file, pad(MaxProjectBytes+1), 0o644); err != nil {
		t.Fatal(err)
	}
	if _, err := Compile(dir, opts(false)); err == nil || !strings.Contains(err.Error(), "more than") {
		t.Fatalf("oversized document: %v", err)
	}
}

// TestModulesStayInsideTheProject: a symbolic link cannot smuggle a file
// from outside the project folder into the package.
func TestModulesStayInsideTheProject(t *testing.T) {
	outside := filepath.Join(t.TempDir(), "secret.tengo")
	if err := os.WriteFile(outside, []byte("x := 1\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	dir := copyProject(t, "testdata/full")
	script := filepath.Join(dir, "scripts", "notify.tengo")
	os.Remove(script)
	if err := os.Symlink(outside, script); err != nil {
		t.Fatal(err)
	}
	_, err := Compile(dir, opts(false))
	if err == nil || !strings.Contains(err.Error(), "module.path") {
		t.Fatalf("a module linked from outside the project was accepted: %v", err)
	}
}
