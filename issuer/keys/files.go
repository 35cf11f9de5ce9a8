package keys

import (
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"

	"github.com/registrum/registrum/internal/secrets"
)

// GeneratedFiles describes a key pair written by [GenerateFiles].
type GeneratedFiles struct {
	// KeyID is the RFC 7638 thumbprint of the key, its `kid`.
	KeyID string
	// Algorithm is the key's signature algorithm.
	Algorithm string
	// SecretRef is the reference to the private JWK: `secret:file/<name>`.
	SecretRef string
	// SecretPath is the path of the private JWK file under the secrets root.
	SecretPath string
	// PublicPath is the path of the public JWK file, `<kid>.json`.
	PublicPath string
}

// GenerateFiles creates a key pair with [Generate] and writes it: the private
// JWK as the owner-only (0600) secret file name under secretsRoot, and the
// public JWK as <kid>.json under publicOut. When name is empty it is
// "jwk-<kid>". secretsRoot is created with mode 0700 when missing; an existing
// one must be an owner-only directory. Neither file may exist already. On any
// failure nothing is left behind.
func GenerateFiles(alg, secretsRoot, publicOut, name string) (*GeneratedFiles, error) {
	if secretsRoot == "" || publicOut == "" {
		return nil, errors.New("keys: generate: both a secrets root and a public output folder are required")
	}
	private, public, err := Generate(alg)
	if err != nil {
		return nil, err
	}
	if name == "" {
		name = "jwk-" + public.KeyID
	}
	ref := secrets.FilePrefix + name
	if _, err := secrets.ParseRef(ref); err != nil {
		return nil, fmt.Errorf("keys: generate: --name: %w", err)
	}
	if err := ensureOwnerOnlyDir(secretsRoot); err != nil {
		return nil, fmt.Errorf("keys: generate: secrets root %q: %w", secretsRoot, err)
	}
	if err := os.MkdirAll(publicOut, 0o755); err != nil {
		return nil, fmt.Errorf("keys: generate: public output folder: %w", err)
	}
	privRaw, err := json.Marshal(private)
	if err != nil {
		return nil, fmt.Errorf("keys: generate: encode the private JWK: %w", err)
	}
	pubRaw, err := json.MarshalIndent(public, "", "  ")
	if err != nil {
		return nil, fmt.Errorf("keys: generate: encode the public JWK: %w", err)
	}
	out := &GeneratedFiles{
		KeyID:      public.KeyID,
		Algorithm:  alg,
		SecretRef:  ref,
		SecretPath: filepath.Join(secretsRoot, name),
		PublicPath: filepath.Join(publicOut, public.KeyID+".json"),
	}
	if err := writeNewFile(out.SecretPath, privRaw, 0o600); err != nil {
		return nil, fmt.Errorf("keys: generate: write the private JWK: %w", err)
	}
	if err := writeNewFile(out.PublicPath, append(pubRaw, '\n'), 0o644); err != nil {
		os.Remove(out.SecretPath)
		syncDir(secretsRoot)
		return nil, fmt.Errorf("keys: generate: write the public JWK: %w", err)
	}
	// Read both back through the same checks the issuer applies at start-up.
	if _, err := secrets.ResolveFile(secretsRoot, ref); err != nil {
		os.Remove(out.SecretPath)
		os.Remove(out.PublicPath)
		return nil, fmt.Errorf("keys: generate: the written secret does not pass its own checks: %w", err)
	}
	if _, err := LoadPublic(out.PublicPath); err != nil {
		os.Remove(out.SecretPath)
		os.Remove(out.PublicPath)
		return nil, fmt.Errorf("keys: generate: the written public JWK does not pass its own checks: %w", err)
	}
	return out, nil
}

// ensureOwnerOnlyDir creates dir with mode 0700 when missing, or checks that
// an existing dir is a directory without group or other permissions.
func ensureOwnerOnlyDir(dir string) error {
	info, err := os.Stat(dir)
	if errors.Is(err, fs.ErrNotExist) {
		if err := os.MkdirAll(dir, 0o700); err != nil {
			return err
		}
		return os.Chmod(dir, 0o700) // MkdirAll is subject to the umask
	}
	if err != nil {
		return err
	}
	if !info.IsDir() {
		return errors.New("not a directory")
	}
	if perm := info.Mode().Perm(); perm&0o077 != 0 {
		return fmt.Errorf("mode %04o gives access to group or others; want 0700", perm)
	}
	return nil
}

// writeNewFile creates path (failing if it exists), writes data, and syncs
// the file and its folder.
func writeNewFile(path string, data []byte, perm os.FileMode) (err error) {
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_CREATE|os.O_EXCL, perm)
	if err != nil {
		return err
	}
	defer func() {
		if cerr := f.Close(); err == nil {
			err = cerr
		}
		if err != nil {
			os.Remove(path)
			return
		}
		err = syncDir(filepath.Dir(path))
	}()
	if err := f.Chmod(perm); err != nil { // the umask may have narrowed perm
		return err
	}
	if _, err := f.Write(data); err != nil {
		return err
	}
	return f.Sync()
}

func syncDir(dir string) error {
	d, err := os.Open(dir)
	if err != nil {
		return err
	}
	defer d.Close()
	return d.Sync()
}
