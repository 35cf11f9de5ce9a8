package keys_test

import (
	"encoding/json"
	"os"
	"path/filepath"
	"testing"

	jose "github.com/go-jose/go-jose/v4"

	"github.com/registrum/registrum/internal/secrets"
	"github.com/registrum/registrum/issuer/keys"
)

func TestGenerateFiles(t *testing.T) {
	base := t.TempDir()
	secretsDir := filepath.Join(base, "secrets")
	public := filepath.Join(base, "public")

	g, err := keys.GenerateFiles("ES256", secretsDir, public, "issuer-signing")
	if err != nil {
		t.Fatal(err)
	}
	if g.SecretRef != "secret:file/issuer-signing" || g.SecretPath != filepath.Join(secretsDir, "issuer-signing") ||
		g.PublicPath != filepath.Join(public, g.KeyID+".json") || g.Algorithm != "ES256" {
		t.Fatalf("%+v", g)
	}
	mode := func(p string) os.FileMode {
		info, err := os.Stat(p)
		if err != nil {
			t.Fatal(err)
		}
		return info.Mode().Perm()
	}
	if m := mode(secretsDir); m != 0o700 {
		t.Fatalf("secrets folder mode %04o, want 0700", m)
	}
	if m := mode(g.SecretPath); m != 0o600 {
		t.Fatalf("secret file mode %04o, want 0600", m)
	}
	pub, err := keys.LoadActiveP256(g.PublicPath)
	if err != nil {
		t.Fatal(err)
	}
	if pub.KeyID != g.KeyID {
		t.Fatalf("kid %q, reported %q", pub.KeyID, g.KeyID)
	}
	raw, err := secrets.ResolveFile(secretsDir, g.SecretRef)
	if err != nil {
		t.Fatal(err)
	}
	var priv jose.JSONWebKey
	if err := json.Unmarshal(raw, &priv); err != nil || priv.IsPublic() {
		t.Fatalf("the secret is not a private JWK: %v", err)
	}
	if tp, _ := keys.Thumbprint(&priv); tp != g.KeyID {
		t.Fatalf("private key thumbprint %q, kid %q", tp, g.KeyID)
	}

	t.Run("default name", func(t *testing.T) {
		g2, err := keys.GenerateFiles("EdDSA", secretsDir, public, "")
		if err != nil {
			t.Fatal(err)
		}
		if g2.SecretRef != "secret:file/jwk-"+g2.KeyID {
			t.Fatalf("ref %q", g2.SecretRef)
		}
	})
	t.Run("never overwrites a secret", func(t *testing.T) {
		before, _ := os.ReadFile(g.SecretPath)
		entries, _ := os.ReadDir(public)
		_, err := keys.GenerateFiles("ES256", secretsDir, public, "issuer-signing")
		wantErr(t, err, "file exists")
		after, _ := os.ReadFile(g.SecretPath)
		entries2, _ := os.ReadDir(public)
		if string(before) != string(after) || len(entries) != len(entries2) {
			t.Fatal("a refused generation changed files")
		}
	})
	t.Run("refuses a group-readable secrets root", func(t *testing.T) {
		open := filepath.Join(base, "open")
		must(t, os.Mkdir(open, 0o750))
		must(t, os.Chmod(open, 0o750))
		_, err := keys.GenerateFiles("ES256", open, public, "x")
		wantErr(t, err, "mode 0750")
		if entries, _ := os.ReadDir(open); len(entries) != 0 {
			t.Fatal("files written into a refused root")
		}
	})
	t.Run("refuses a bad name or algorithm", func(t *testing.T) {
		_, err := keys.GenerateFiles("ES256", secretsDir, public, "../escape")
		wantErr(t, err, "--name")
		_, err = keys.GenerateFiles("ES384", secretsDir, public, "x")
		wantErr(t, err, `"ES384"`)
		if _, err := os.Stat(filepath.Join(secretsDir, "x")); err == nil {
			t.Fatal("a refused generation left a secret")
		}
	})
}
