package project

import (
	"encoding/json"
	"os"
	"regexp"
	"strings"
	"testing"
)

// TestAuthoringGuideCoversTheFormat: docs/authoring.md names every key of
// the format and every rule the compiler reports.
func TestAuthoringGuideCoversTheFormat(t *testing.T) {
	raw, err := os.ReadFile("../docs/authoring.md")
	if err != nil {
		t.Fatal(err)
	}
	guide := string(raw)
	var schema struct {
		Defs map[string]struct {
			Properties map[string]any `json:"properties"`
		} `json:"$defs"`
	}
	if err := json.Unmarshal(FormatSchema(), &schema); err != nil {
		t.Fatal(err)
	}
	for def, d := range schema.Defs {
		for key := range d.Properties {
			if !strings.Contains(guide, key+"`") {
				t.Errorf("docs/authoring.md does not explain key %s (of %s)", key, def)
			}
		}
	}
	rules := map[string]bool{}
	ruleRE := regexp.MustCompile(`"([a-z-]+\.[a-z-]+)", "`)
	files, _ := os.ReadDir(".")
	for _, f := range files {
		if !strings.HasSuffix(f.Name(), ".go") || strings.HasSuffix(f.Name(), "_test.go") {
			continue
		}
		src, err := os.ReadFile(f.Name())
		if err != nil {
			t.Fatal(err)
		}
		for _, m := range ruleRE.FindAllStringSubmatch(string(src), -1) {
			rules[m[1]] = true
		}
	}
	if len(rules) < 40 {
		t.Fatalf("found only %d rule identifiers in the compiler", len(rules))
	}
	for r := range rules {
		if !strings.Contains(guide, "`"+r+"`") {
			t.Errorf("docs/authoring.md does not list rule %s", r)
		}
	}
}
