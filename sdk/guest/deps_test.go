package guest_test

import (
	"os"
	"os/exec"
	"strings"
	"testing"
)

// TestGuestDependencies checks the guest SDK builds for GOOS=wasip1 and
// depends on nothing but the standard library, the plugin contract and the
// JSON reader and canonical writer it uses: no host runtime (wazero, tengo)
// is linked into a module.
func TestGuestDependencies(t *testing.T) {
	cmd := exec.Command("go", "list", "-deps", "-f", "{{.ImportPath}} {{.Standard}}", ".")
	cmd.Env = append(os.Environ(), "GOOS=wasip1", "GOARCH=wasm")
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("go list: %v\n%s", err, out)
	}
	allowed := map[string]bool{
		"github.com/registrum/registrum/sdk/guest":           true,
		"github.com/registrum/registrum/plugins/contract":    true,
		"github.com/registrum/registrum/internal/strictjson": true,
		"github.com/registrum/registrum/internal/canonjson":  true,
		"github.com/gowebpki/jcs":                            true,
	}
	for _, line := range strings.Split(strings.TrimSpace(string(out)), "\n") {
		path, std, _ := strings.Cut(line, " ")
		if std != "true" && !allowed[path] {
			t.Errorf("the guest SDK depends on %s", path)
		}
	}
}
