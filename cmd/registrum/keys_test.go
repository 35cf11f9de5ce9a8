package main

import (
	"bytes"
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/registrum/registrum/internal/secrets"
	"github.com/registrum/registrum/issuer/keys"
)

// runKeysCmd runs the registrum root command with args and returns its output.
func runKeysCmd(t *testing.T, args ...string) (string, error) {
	t.Helper()
	root := newRootCmd()
	var out bytes.Buffer
	root.SetOut(&out)
	root.SetErr(&out)
	root.SetArgs(args)
	err := root.ExecuteContext(context.Background())
	return out.String(), err
}

func TestKeysGenerateCommand(t *testing.T) {
	dir := t.TempDir()
	secretsDir, public := filepath.Join(dir, "secrets"), filepath.Join(dir, "public")
	for _, alg := range []string{"ES256", "EdDSA", "RS256"} {
		t.Run(alg, func(t *testing.T) {
			out, err := runKeysCmd(t, "keys", "generate", "--alg", alg, "--secrets-root", secretsDir, "--public-out", public, "--name", "client-"+strings.ToLower(alg))
			if err != nil {
				t.Fatal(err)
			}
			lines := strings.Split(strings.TrimSpace(out), "\n")
			if len(lines) != 3 || !strings.HasPrefix(lines[0], "kid: ") {
				t.Fatalf("output %q", out)
			}
			kid := strings.TrimPrefix(lines[0], "kid: ")
			ref := "secret:file/client-" + strings.ToLower(alg)
			pubPath := filepath.Join(public, kid+".json")
			if lines[1] != "secret: "+ref || lines[2] != "public: "+pubPath {
				t.Fatalf("output %q", out)
			}
			pub, err := keys.LoadPublic(pubPath)
			if err != nil || pub.KeyID != kid || pub.Algorithm != alg {
				t.Fatalf("public JWK %+v: %v", pub, err)
			}
			info, err := os.Stat(filepath.Join(secretsDir, "client-"+strings.ToLower(alg)))
			if err != nil || info.Mode().Perm() != 0o600 {
				t.Fatalf("secret file: %v, %v", info, err)
			}
			if info, err := os.Stat(secretsDir); err != nil || info.Mode().Perm() != 0o700 {
				t.Fatalf("secrets folder: %v", err)
			}
			if _, err := secrets.ResolveFile(secretsDir, ref); err != nil {
				t.Fatal(err)
			}
		})
	}
	t.Run("missing flags exit 2", func(t *testing.T) {
		_, err := runKeysCmd(t, "keys", "generate", "--alg", "ES256")
		var ee *exitError
		if !errors.As(err, &ee) || ee.code != 2 || !strings.Contains(err.Error(), "--secrets-root") {
			t.Fatalf("err = %v", err)
		}
	})
	t.Run("unknown algorithm", func(t *testing.T) {
		_, err := runKeysCmd(t, "keys", "generate", "--alg", "HS256", "--secrets-root", secretsDir, "--public-out", public)
		if err == nil || !strings.Contains(err.Error(), `"HS256"`) {
			t.Fatalf("err = %v", err)
		}
	})
}
