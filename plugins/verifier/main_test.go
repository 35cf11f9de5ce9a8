package verifier_test

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/registrum/registrum/internal/canonjson"
	"github.com/registrum/registrum/plugins/verifier"
)

// bins holds the verifier binaries built once for this test binary.
var bins string

// TestMain builds the example EICAR verifier and the hostile test verifiers
// with one go build, into a temporary folder.
func TestMain(m *testing.M) {
	dir, err := os.MkdirTemp("", "verifier-bins")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(2)
	}
	bins = dir
	cmd := exec.Command("go", "build", "-o", dir+string(filepath.Separator),
		"./examples/plugins/eicar-verifier",
		"./plugins/verifier/testdata/hostile",
		"./plugins/verifier/testdata/garbage",
		"./plugins/verifier/testdata/wronghandshake",
	)
	cmd.Dir = filepath.Join("..", "..")
	if out, err := cmd.CombinedOutput(); err != nil {
		fmt.Fprintf(os.Stderr, "building test verifiers: %v\n%s", err, out)
		os.Exit(2)
	}
	code := m.Run()
	_ = os.RemoveAll(dir)
	os.Exit(code)
}

// binary returns the path of a built verifier and its pinned digest.
func binary(t testing.TB, name string) (string, string) {
	t.Helper()
	path := filepath.Join(bins, name)
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	return path, canonjson.DigestBytes(b)
}

// newProcess starts nothing yet: it pins the named binary and returns the verifier.
func newProcess(t testing.TB, name string) *verifier.Process {
	t.Helper()
	path, digest := binary(t, name)
	p, err := verifier.NewProcess(verifier.ProcessConfig{ID: name, Path: path, SHA256: digest})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = p.Close() })
	return p
}

// attachment describes content for slot.
func attachment(slot string, content []byte) verifier.Attachment {
	sum := sha256.Sum256(content)
	return verifier.Attachment{SlotID: slot, MediaType: "application/pdf", DeclaredSize: int64(len(content)), SHA256: hex.EncodeToString(sum[:])}
}

// eicar builds the EICAR test string from pieces, so this file does not hold it whole.
func eicar() []byte {
	return []byte(strings.Join([]string{`X5O!P%@AP[4\PZX54(P^)7CC)7}$`, "EICAR-STANDARD-", "ANTIVIRUS-TEST-", "FILE!$H+H*"}, ""))
}

// filler returns n bytes of ordinary content.
func filler(n int) []byte {
	return bytes.Repeat([]byte("0123456789abcdef"), n/16+1)[:n]
}

// noSecretText fails when an error's text carries text a plugin or scanner controls.
func noSecretText(t testing.TB, err error) {
	t.Helper()
	if err != nil && strings.Contains(err.Error(), "secret") {
		t.Fatalf("error text carries plugin-controlled text: %q", err)
	}
}
