package registrum_test

import (
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
)

// The README and CONTRIBUTING are read in a fresh clone: every path they
// name or link to is inside the repository and exists.
func TestReadmeAndContributingStandAlone(t *testing.T) {
	link := regexp.MustCompile(`\]\(([^)#\s]+)[^)]*\)`)
	for _, doc := range []string{"README.md", "CONTRIBUTING.md"} {
		b, err := os.ReadFile(doc)
		if err != nil {
			t.Fatal(err)
		}
		text := string(b)
		if strings.Contains(text, "../") {
			t.Errorf("%s names a path outside the repository (../)", doc)
		}
		for _, m := range link.FindAllStringSubmatch(text, -1) {
			target := m[1]
			if strings.Contains(target, "://") || strings.HasPrefix(target, "mailto:") {
				continue
			}
			if _, err := os.Stat(filepath.FromSlash(target)); err != nil {
				t.Errorf("%s links to %s, which is not in the repository: %v", doc, target, err)
			}
		}
	}
}
