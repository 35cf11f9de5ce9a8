// Package secrets resolves file secrets: `secret:file/<name>` references to
// owner-only regular files under a configured root. It is the one place the
// issuer, the record host and the plugin host read secrets from.
package secrets

import (
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"regexp"
	"strings"
	"syscall"
)

// FilePrefix starts every file secret reference: `secret:file/<name>`.
const FilePrefix = "secret:file/"

// MaxBytes bounds the size of a secret file.
const MaxBytes = 64 << 10

// secretName is the grammar of a secret name: a plain file name that starts
// with a letter or digit, at most 128 bytes.
var secretName = regexp.MustCompile(`^[A-Za-z0-9][A-Za-z0-9._-]{0,127}$`)

// ParseRef returns the name in a `secret:file/<name>` reference. The name
// must be a plain file name: 1 to 128 bytes of A-Z a-z 0-9 . _ -, starting with
// a letter or digit, with no path separator and no "..".
func ParseRef(ref string) (string, error) {
	name, ok := strings.CutPrefix(ref, FilePrefix)
	if !ok {
		return "", fmt.Errorf("secrets: secret reference %q does not start with %q", ref, FilePrefix)
	}
	if !secretName.MatchString(name) || strings.Contains(name, "..") {
		return "", fmt.Errorf("secrets: secret reference %q: the name must be a plain file name of 1 to 128 bytes of A-Z a-z 0-9 . _ - starting with a letter or digit, without \"..\"", ref)
	}
	return name, nil
}

// ResolveFile reads the secret a `secret:file/<name>` reference names,
// from the file <name> under root. The file must stay inside root (a symbolic
// link is followed only while it stays inside root), be a regular file with a
// single link, be owned by the effective user, have no group or other
// permission bits, and hold 1 to [MaxBytes] bytes. The bytes are
// returned as they are (no trimming). Errors name the reference and the rule
// broken, never the content.
func ResolveFile(root, ref string) ([]byte, error) {
	name, err := ParseRef(ref)
	if err != nil {
		return nil, err
	}
	if root == "" {
		return nil, fmt.Errorf("secrets: secret %q: no secret root configured", ref)
	}
	r, err := os.OpenRoot(root)
	if err != nil {
		return nil, fmt.Errorf("secrets: secret %q: open secret root: %w", ref, err)
	}
	defer r.Close()
	f, err := r.Open(name)
	if err != nil {
		if errors.Is(err, fs.ErrNotExist) {
			return nil, fmt.Errorf("secrets: secret %q: no such file under the secret root %q", ref, root)
		}
		return nil, fmt.Errorf("secrets: secret %q: the file must be inside the secret root %q: %w", ref, root, err)
	}
	defer f.Close()
	info, err := f.Stat()
	if err != nil {
		return nil, fmt.Errorf("secrets: secret %q: stat: %w", ref, err)
	}
	if !info.Mode().IsRegular() {
		return nil, fmt.Errorf("secrets: secret %q: not a regular file (mode %s)", ref, info.Mode().Type())
	}
	if perm := info.Mode().Perm(); perm&0o077 != 0 {
		return nil, fmt.Errorf("secrets: secret %q: mode %04o gives access to group or others; want owner-only (0600 or 0400)", ref, perm)
	}
	st, ok := info.Sys().(*syscall.Stat_t)
	if !ok {
		return nil, fmt.Errorf("secrets: secret %q: cannot read file ownership on this platform", ref)
	}
	if euid := os.Geteuid(); int(st.Uid) != euid {
		return nil, fmt.Errorf("secrets: secret %q: owned by uid %d, not by the service's user (uid %d)", ref, st.Uid, euid)
	}
	if st.Nlink != 1 {
		return nil, fmt.Errorf("secrets: secret %q: the file has %d hard links; want exactly 1", ref, st.Nlink)
	}
	raw, err := io.ReadAll(io.LimitReader(f, MaxBytes+1))
	if err != nil {
		return nil, fmt.Errorf("secrets: secret %q: read: %w", ref, err)
	}
	switch {
	case len(raw) == 0:
		return nil, fmt.Errorf("secrets: secret %q: the file is empty", ref)
	case len(raw) > MaxBytes:
		return nil, fmt.Errorf("secrets: secret %q: the file is larger than %d bytes", ref, MaxBytes)
	}
	return raw, nil
}
