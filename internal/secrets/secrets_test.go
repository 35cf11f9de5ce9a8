package secrets_test

import (
	"bytes"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/registrum/registrum/internal/secrets"
)

// secretBytes is distinctive content: no error may ever contain it.
const secretBytes = "TOP-SECRET-VALUE-0123456789abcdef-0123456789abcdef\n"

func noLeak(t *testing.T, err error) {
	t.Helper()
	if err != nil && strings.Contains(err.Error(), strings.TrimSpace(secretBytes)) {
		t.Fatalf("error leaks the secret: %v", err)
	}
}

func TestResolveFileSecretAccepts(t *testing.T) {
	root := t.TempDir()
	for _, perm := range []os.FileMode{0o600, 0o400} {
		writeFile(t, root, "key-"+perm.String()[1:4], []byte(secretBytes), perm)
	}
	for _, name := range []string{"key-rw-", "key-r--"} {
		got, err := secrets.ResolveFile(root, "secret:file/"+name)
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		if string(got) != secretBytes {
			t.Fatalf("%s: bytes changed (trailing newline must be kept): %q", name, got)
		}
	}
	t.Run("symlink inside the root", func(t *testing.T) {
		// Kubernetes secret volumes link each name into a hidden data folder.
		if err := os.Mkdir(filepath.Join(root, "..data"), 0o700); err != nil {
			t.Fatal(err)
		}
		writeFile(t, filepath.Join(root, "..data"), "linked", []byte(secretBytes), 0o600)
		if err := os.Symlink("..data/linked", filepath.Join(root, "linked")); err != nil {
			t.Fatal(err)
		}
		got, err := secrets.ResolveFile(root, "secret:file/linked")
		if err != nil || string(got) != secretBytes {
			t.Fatalf("got %q, %v", got, err)
		}
	})
	t.Run("size edges", func(t *testing.T) {
		writeFile(t, root, "max", bytes.Repeat([]byte{'a'}, secrets.MaxBytes), 0o600)
		if got, err := secrets.ResolveFile(root, "secret:file/max"); err != nil || len(got) != secrets.MaxBytes {
			t.Fatalf("%d bytes, %v", len(got), err)
		}
		writeFile(t, root, "max1", bytes.Repeat([]byte{'a'}, secrets.MaxBytes+1), 0o600)
		_, err := secrets.ResolveFile(root, "secret:file/max1")
		wantErr(t, err, `"secret:file/max1"`, "larger than 65536 bytes")
		writeFile(t, root, "one", []byte{0}, 0o600)
		if got, err := secrets.ResolveFile(root, "secret:file/one"); err != nil || len(got) != 1 {
			t.Fatalf("%d bytes, %v", len(got), err)
		}
		writeFile(t, root, "empty", nil, 0o600)
		_, err = secrets.ResolveFile(root, "secret:file/empty")
		wantErr(t, err, "empty")
	})
}

func TestResolveFileSecretRefusesBadReferences(t *testing.T) {
	root := t.TempDir()
	writeFile(t, root, "ok", []byte(secretBytes), 0o600)
	bad := []string{
		"file/ok", "secret:env/ok", "secret:file/", "secret:file/../ok", "secret:file/a/b",
		"secret:file/.hidden", "secret:file/-dash", "secret:file/a..b", "secret:file/" + strings.Repeat("a", 129),
		"secret:file/ok\x00", "secret:file/é",
	}
	for _, ref := range bad {
		_, err := secrets.ResolveFile(root, ref)
		if err == nil {
			t.Fatalf("%q accepted", ref)
		}
		if !strings.Contains(err.Error(), "secret reference") {
			t.Fatalf("%q: error %q does not explain the reference rule", ref, err)
		}
	}
	if _, err := secrets.ResolveFile(root, "secret:file/"+strings.Repeat("a", 128)); err == nil || strings.Contains(err.Error(), "secret reference") {
		t.Fatalf("a 128-byte name must pass the grammar (and then not be found): %v", err)
	}
	_, err := secrets.ResolveFile("", "secret:file/ok")
	wantErr(t, err, "no secret root")
}

func TestResolveFileSecretRefusesUnsafeFiles(t *testing.T) {
	outside := t.TempDir()
	root := t.TempDir()
	writeFile(t, outside, "target", []byte(secretBytes), 0o600)
	for _, perm := range []os.FileMode{0o640, 0o604, 0o620, 0o602, 0o610, 0o601} {
		writeFile(t, root, fmt.Sprintf("perm%04o", perm), []byte(secretBytes), perm)
	}
	if err := os.Mkdir(filepath.Join(root, "dir"), 0o700); err != nil {
		t.Fatal(err)
	}
	must(t, os.Symlink(filepath.Join(outside, "target"), filepath.Join(root, "abs-escape")))
	must(t, os.Symlink("../"+filepath.Base(outside)+"/target", filepath.Join(root, "rel-escape")))
	writeFile(t, root, "linked", []byte(secretBytes), 0o600)
	must(t, os.Link(filepath.Join(root, "linked"), filepath.Join(root, "hardlink")))
	must(t, os.Link(filepath.Join(outside, "target"), filepath.Join(root, "hardlink-out")))

	cases := map[string][]string{
		"perm0640":     {"mode 0640", "owner-only"},
		"perm0604":     {"mode 0604"},
		"perm0620":     {"mode 0620"},
		"perm0602":     {"mode 0602"},
		"perm0610":     {"mode 0610"},
		"perm0601":     {"mode 0601"},
		"dir":          {"not a regular file"},
		"abs-escape":   {"inside the secret root"},
		"rel-escape":   {"inside the secret root"},
		"hardlink":     {"2 hard links"},
		"hardlink-out": {"2 hard links"},
		"missing":      {"no such file under the secret root"},
	}
	for name, parts := range cases {
		t.Run(name, func(t *testing.T) {
			_, err := secrets.ResolveFile(root, "secret:file/"+name)
			wantErr(t, err, append([]string{`"secret:file/` + name + `"`}, parts...)...)
			noLeak(t, err)
		})
	}
	t.Run("owned by another user", func(t *testing.T) {
		if os.Geteuid() != 0 {
			t.Log("not root: cannot give a file to another user here; the ownership rule is exercised on root machines (CI)")
			return
		}
		p := writeFile(t, root, "foreign", []byte(secretBytes), 0o600)
		must(t, os.Chown(p, 65534, 65534))
		_, err := secrets.ResolveFile(root, "secret:file/foreign")
		wantErr(t, err, "owned by uid 65534")
		noLeak(t, err)
	})
}

func must(t *testing.T, err error) {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
}

// writeFile writes data with exactly perm (whatever the umask).
func writeFile(t *testing.T, dir, name string, data []byte, perm os.FileMode) string {
	t.Helper()
	p := filepath.Join(dir, name)
	if err := os.WriteFile(p, data, perm); err != nil {
		t.Fatal(err)
	}
	if err := os.Chmod(p, perm); err != nil {
		t.Fatal(err)
	}
	return p
}

func wantErr(t *testing.T, err error, parts ...string) {
	t.Helper()
	if err == nil {
		t.Fatalf("no error; want one mentioning %q", parts)
	}
	for _, p := range parts {
		if !strings.Contains(err.Error(), p) {
			t.Fatalf("error %q does not mention %q", err, p)
		}
	}
}
