package main

import (
	"bytes"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestHashPasswordMakesAHashTheConfigurationTakes: the password comes from
// standard input, the hash printed is accepted as reviewerPasswordHash, and
// the password itself is printed nowhere.
func TestHashPasswordMakesAHashTheConfigurationTakes(t *testing.T) {
	var out, errs bytes.Buffer
	if err := run([]string{"hash-password"}, strings.NewReader("s3cret pass\n"), &out, &errs); err != nil {
		t.Fatal(err)
	}
	hash := strings.TrimSpace(out.String())
	if !strings.HasPrefix(hash, "pbkdf2-sha256$600000$") || strings.Contains(out.String()+errs.String(), "s3cret") {
		t.Fatalf("hash-password printed %q %q", out.String(), errs.String())
	}
	dir := t.TempDir()
	cfg := filepath.Join(dir, "desk.json")
	doc := `{"publicUrl":"http://127.0.0.1:1","dataFile":"` + filepath.Join(dir, "r.json") + `","reviewerPasswordHash":"` + hash + `",
"authentication":{"issuer":"https://localhost:1","jwksUrl":"http://127.0.0.1:1/jwks","audience":"a","clients":["c"]},"profiles":["p"],"policies":{"x":{"version":"1"}}}`
	if err := os.WriteFile(cfg, []byte(doc), 0o600); err != nil {
		t.Fatal(err)
	}
	// A listen address that cannot be bound fails after the configuration
	// was accepted.
	err := run([]string{"-config", cfg, "-listen", "256.0.0.1:0"}, nil, &out, &errs)
	if err == nil || !strings.Contains(err.Error(), "listen") {
		t.Fatalf("serve on a bad address: %v", err)
	}
	if err := run([]string{"hash-password"}, strings.NewReader("\n"), &out, &errs); err == nil {
		t.Fatal("an empty password was hashed")
	}
	if err := run([]string{"-config", filepath.Join(dir, "missing.json")}, nil, &out, &errs); err == nil {
		t.Fatal("a missing configuration was accepted")
	}
}
