package project

import (
	"math"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/registrum/registrum/internal/bombtest"
	"github.com/registrum/registrum/project/internal/source"
)

// TestCompileRefusesAnAliasBomb: `registrum compile` on a project document
// that is a "billion laughs" YAML document is refused quickly, naming the
// file, with bounded memory (in a memory-limited child process).
func TestCompileRefusesAnAliasBomb(t *testing.T) {
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, "registry.yaml"), []byte(bombtest.AliasBomb()), 0o644); err != nil {
		t.Fatal(err)
	}
	bombtest.Refuses(t, func() error {
		_, err := Compile(dir, opts(false))
		return err
	}, "registry.yaml:", "format.syntax", "expands to more than")
}

// TestCompileNumbersAreStrict: an integer given as a string or a fraction,
// and a negative limit, are findings at the key, never coerced.
func TestCompileNumbersAreStrict(t *testing.T) {
	base := minimal(t)
	entity := func(extra string) string {
		return strings.Replace(base, "    dataset: land\n", "    dataset: land\n"+extra, 1)
	}
	cases := []struct {
		name, doc, path string
	}{
		{"string for an integer", strings.Replace(base, "maxLength: 32", `maxLength: "32"`, 1), "entities[0].fields[0].maxLength"},
		{"fraction for an integer", strings.Replace(base, "maxLength: 32", "maxLength: 3.5", 1), "entities[0].fields[0].maxLength"},
		{"negative limit", entity("    maximumBodyBytes: -1\n"), "entities[0].maximumBodyBytes"},
		{"negative batch items", entity("    batch: {maximumItems: -3, maximumBytes: 1024}\n"), "entities[0].batch.maximumItems"},
		{"string batch bytes", entity("    batch: {maximumItems: 3, maximumBytes: \"1024\"}\n"), "entities[0].batch.maximumBytes"},
		{"fractional cursor age", entity("    cursor: {maxAgeSeconds: 60.5}\n"), "entities[0].cursor.maxAgeSeconds"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			if c.doc == base {
				t.Fatal("edit not applied")
			}
			_, fs := compileText(t, c.doc, opts(false))
			found := false
			for _, f := range fs {
				found = found || (f.Path == c.path && f.File == "registry.yaml" && f.Line > 0)
			}
			if !found {
				t.Fatalf("no finding at %s in registry.yaml: %v", c.path, fs)
			}
		})
	}
}

// TestCompileWithinTheNodeBudgetStaysBounded: the costliest document the
// project's node budget lets through (aliases expanding to just under it)
// is answered within bombtest.MaxCPU of processor time and 100 MiB, and one just past it is refused
// by the budget.
func TestCompileWithinTheNodeBudgetStaysBounded(t *testing.T) {
	n := int(math.Sqrt(source.MaxNodes)) - 4
	for name, doc := range map[string]string{
		"within": bombtest.SquareBomb(n),
		"past":   bombtest.SquareBomb(n + 8),
	} {
		t.Run(name, func(t *testing.T) {
			dir := t.TempDir()
			if err := os.WriteFile(filepath.Join(dir, "registry.yaml"), []byte(doc), 0o644); err != nil {
				t.Fatal(err)
			}
			a := bombtest.Bounded(t, func() error {
				_, err := Compile(dir, opts(false))
				return err
			})
			if a.Child {
				return
			}
			refused := strings.Contains(a.Err, "expands to more than")
			if refused != (name == "past") {
				t.Fatalf("answer %q", a.Err)
			}
		})
	}
}

// TestCompileWrongKindsSpeakOfKeysNotGoTypes: a key of a project file
// holding the wrong kind of value is a finding naming the file, the line,
// the key and the kind it must hold, in the author's words (a list, a
// mapping), never a Go or JSON type name.
func TestCompileWrongKindsSpeakOfKeysNotGoTypes(t *testing.T) {
	base := minimal(t)
	goTerms := regexp.MustCompile(`interface \{\}|struct|uint|int\d|float\d|\bGo\b|unmarshal|\[\]|map\[|array|object`)
	cases := []struct {
		name, old, new, path, message string
		line                          int
	}{
		{"list for a string", "  language: en", "  language: [en]", "registry.language", "must be a string, not a list", 5},
		{"list for an integer", "maxLength: 32", "maxLength: [1, 2]", "entities[0].fields[0].maxLength", "must be an integer, not a list", 12},
		{"mapping for a list", "operations: [create, get, list, patch]", "operations: {a: 1}", "profiles[0].grants[0].operations", "must be a list, not a mapping", 23},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			doc := strings.Replace(base, c.old, c.new, 1)
			if doc == base {
				t.Fatal("edit not applied")
			}
			_, fs := compileText(t, doc, opts(false))
			found := false
			for _, f := range fs {
				if goTerms.MatchString(f.Message) {
					t.Errorf("finding %v speaks of Go or JSON types", f)
				}
				found = found || (f.File == "registry.yaml" && f.Line == c.line && f.Path == c.path && f.Message == c.message)
			}
			if !found {
				t.Fatalf("no finding %q at registry.yaml:%d %s: %v", c.message, c.line, c.path, fs)
			}
		})
	}
}
