package project

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/registrum/registrum/model"
	"github.com/registrum/registrum/project/generate"
)

// TestCompileWarnsAboutUnservedCapabilities compiles the full test project,
// which declares every capability, and checks that each declared capability
// the record host does not serve is a warning at the key that declares it,
// while the package still compiles and its OpenAPI document leaves the
// routes out.
func TestCompileWarnsAboutUnservedCapabilities(t *testing.T) {
	unserved := 0
	for _, c := range model.ServiceCapabilities() {
		if !c.Served {
			unserved++
		}
	}
	if unserved == 0 {
		t.Skip("every capability is served: there is nothing to warn about (generate's TestOpenAPIListsOnlyServedRoutes takes one out of service)")
	}
	res, err := Compile("testdata/full", opts(false))
	if err != nil {
		t.Fatal(err)
	}
	if len(res.Warnings) == 0 {
		t.Fatal("no warnings, but the project declares capabilities the host does not serve")
	}
	byCapability := map[string]Finding{}
	for _, w := range res.Warnings {
		if w.Rule == RuleUngranted {
			continue
		}
		if w.Severity != SeverityWarning || w.Rule != RuleUnserved || w.Line == 0 || w.File == "" {
			t.Errorf("warning %+v", w)
		}
		if !strings.Contains(w.String(), "warning: ") || !strings.Contains(w.Message, "declared, not yet served by this host") {
			t.Errorf("warning text %q", w.String())
		}
		for _, c := range model.ServiceCapabilities() {
			if strings.HasPrefix(w.Message, c.Title+" of ") {
				if c.Served {
					t.Errorf("warning about served capability %s", c.ID)
				}
				byCapability[c.ID] = w
			}
		}
	}
	for _, c := range model.ServiceCapabilities() {
		if c.Served {
			continue
		}
		if _, ok := byCapability[c.ID]; !ok && c.ID != model.CapRevisions {
			t.Errorf("no warning for unserved capability %s", c.ID)
		}
	}
	if w, ok := byCapability[model.CapTemporalReads]; ok && !strings.HasSuffix(w.Path, ".temporal") {
		t.Errorf("temporal warning at %s, want the temporal key", w.Path)
	}
	doc := string(res.Contents[model.OpenAPIPath])
	var d struct {
		Paths map[string]any `json:"paths"`
	}
	if err := json.Unmarshal([]byte(doc), &d); err != nil {
		t.Fatal(err)
	}
	for path := range d.Paths {
		for _, unserved := range []string{} { // every capability is served
			if strings.Contains(path, unserved) {
				t.Errorf("openapi.json lists %s, which the host does not serve", path)
			}
		}
	}
	// The document in the package is the document generate.OpenAPI gives,
	// which the host serves.
	want, err := generate.OpenAPI(res.Package)
	if err != nil {
		t.Fatal(err)
	}
	if string(want) != doc {
		t.Error("packaged openapi.json differs from generate.OpenAPI")
	}
}
