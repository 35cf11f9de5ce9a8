package verifier

import (
	"crypto/x509"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"time"

	"github.com/hashicorp/go-hclog"

	"github.com/registrum/registrum/internal/canonjson"
	"github.com/registrum/registrum/internal/secrets"
	"github.com/registrum/registrum/model"
)

var specIDPattern = regexp.MustCompile(`^[a-z][a-z0-9-]{0,63}$`)

// timeout returns an entry's per-call timeout.
func timeout(s model.Verifier) time.Duration {
	if s.TimeoutMilliseconds == 0 {
		return DefaultHTTPTimeout
	}
	return time.Duration(s.TimeoutMilliseconds) * time.Millisecond
}

// validate checks one entry's shape (not its files or secrets); the error
// names the member at fault.
func validate(s model.Verifier) error {
	if !specIDPattern.MatchString(s.ID) {
		return errors.New("id: must be 1 to 64 characters of a-z 0-9 - starting with a letter")
	}
	if s.TimeoutMilliseconds != 0 && (s.TimeoutMilliseconds < 100 || s.TimeoutMilliseconds > 60000) {
		return fmt.Errorf("timeoutMilliseconds: %d outside 100..60000", s.TimeoutMilliseconds)
	}
	if s.MaximumBytes != 0 && (s.MaximumBytes < 1 || s.MaximumBytes > MaxContentBytes) {
		return fmt.Errorf("maximumBytes: %d outside 1..%d", s.MaximumBytes, MaxContentBytes)
	}
	switch s.Kind {
	case model.VerifierGoPlugin:
		switch {
		case s.Endpoint != "":
			return errors.New("endpoint: not allowed for kind go-plugin")
		case s.AuthorizationRef != "":
			return errors.New("authorizationRef: not allowed for kind go-plugin")
		case s.Path == "" || !filepath.IsLocal(s.Path):
			return fmt.Errorf("path: %q must be a relative path inside the package folder", s.Path)
		}
		if _, err := parsePinnedDigest(s.SHA256); err != nil {
			return fmt.Errorf("sha256: %w", err)
		}
	case model.VerifierHTTP:
		switch {
		case s.Path != "":
			return errors.New("path: not allowed for kind http")
		case s.SHA256 != "":
			return errors.New("sha256: not allowed for kind http")
		}
		if _, err := checkEndpoint(s.Endpoint); err != nil {
			return fmt.Errorf("endpoint: %w", err)
		}
		if _, err := secrets.ParseRef(s.AuthorizationRef); err != nil {
			return fmt.Errorf("authorizationRef: %w", err)
		}
	default:
		return fmt.Errorf("kind: %q is not go-plugin or http", s.Kind)
	}
	return nil
}

// ReadPackage reads (through model.ReadVerifiers) and checks the shape of
// the "verifiers" member of a package.json; the other members are ignored.
// It returns the entries and the folder their paths are relative to. It does
// not look at binaries or secrets.
func ReadPackage(packageFile string) ([]model.Verifier, string, error) {
	specs, dir, err := model.ReadVerifiers(packageFile)
	if err != nil {
		return nil, "", fmt.Errorf("verifier: %w", err)
	}
	seen := map[string]int{}
	for i, s := range specs {
		if err := validate(s); err != nil {
			return nil, "", fmt.Errorf("verifier: %w", &model.PackageError{File: packageFile, Member: fmt.Sprintf("verifiers[%d]", i), Err: err})
		}
		if j, dup := seen[s.ID]; dup {
			return nil, "", fmt.Errorf("verifier: %w", &model.PackageError{File: packageFile, Member: fmt.Sprintf("verifiers[%d].id", i), Err: fmt.Errorf("%q already used by verifiers[%d]", s.ID, j)})
		}
		seen[s.ID] = i
	}
	return specs, dir, nil
}

// CheckPackage checks a package's verifiers as a starting host would,
// without starting anything: the entries' shape, each go-plugin binary
// against its pinned digest, and, when secretRoot is not empty, each http
// credential. It reports every problem found, one per line.
func CheckPackage(packageFile, secretRoot string) ([]model.Verifier, error) {
	specs, dir, err := ReadPackage(packageFile)
	if err != nil {
		return nil, err
	}
	var errs []error
	for i, s := range specs {
		switch s.Kind {
		case model.VerifierGoPlugin:
			if err := CheckBinary(filepath.Join(dir, s.Path), s.SHA256); err != nil {
				errs = append(errs, fmt.Errorf("verifier: verifiers[%d] (%s): %w", i, s.ID, err))
			}
		case model.VerifierHTTP:
			if secretRoot != "" {
				if _, err := readCredential(secretRoot, s.AuthorizationRef); err != nil {
					errs = append(errs, fmt.Errorf("verifier: verifiers[%d] (%s): %w", i, s.ID, err))
				}
			}
		}
	}
	return specs, errors.Join(errs...)
}

// OpenOptions are the host-side settings Open needs beside a package entry.
type OpenOptions struct {
	// PackageDir is the folder go-plugin paths are relative to.
	PackageDir string
	// SecretRoot is the folder secret references are resolved under.
	SecretRoot string
	// Logger receives go-plugin's log lines at Warn; nil means standard error.
	Logger hclog.Logger
	// RootCAs replaces the system roots for https scanners when set.
	RootCAs *x509.CertPool
	// Timeout, when set, replaces the entries' own per-call timeout (it is
	// held within 100 ms..60 s).
	Timeout time.Duration
}

// Open returns the verifier an entry describes, checking its binary's
// digest or its credential first.
func Open(s model.Verifier, opts OpenOptions) (VerifyCloser, error) {
	if err := validate(s); err != nil {
		return nil, fmt.Errorf("verifier %q: %w", s.ID, err)
	}
	if opts.Timeout > 0 {
		s.TimeoutMilliseconds = int(min(max(opts.Timeout, MinHTTPTimeout), MaxHTTPTimeout).Milliseconds())
	}
	switch s.Kind {
	case model.VerifierGoPlugin:
		return NewProcess(ProcessConfig{
			ID: s.ID, Path: filepath.Join(opts.PackageDir, s.Path), SHA256: s.SHA256,
			MaxBytes: s.MaximumBytes, Timeout: timeout(s), Logger: opts.Logger,
		})
	default:
		return NewHTTP(HTTPConfig{
			ID: s.ID, Endpoint: s.Endpoint, SecretRoot: opts.SecretRoot, CredentialRef: s.AuthorizationRef,
			Timeout: timeout(s), MaxBytes: s.MaximumBytes, RootCAs: opts.RootCAs,
		})
	}
}

// OpenPackage opens every verifier of a package, keyed by id. It refuses
// (and opens nothing) when any entry is malformed, a binary does not match
// its pinned digest or a credential cannot be read.
func OpenPackage(packageFile string, opts OpenOptions) (map[string]VerifyCloser, error) {
	specs, dir, err := ReadPackage(packageFile)
	if err != nil {
		return nil, err
	}
	opts.PackageDir = dir
	out := make(map[string]VerifyCloser, len(specs))
	for i, s := range specs {
		v, err := Open(s, opts)
		if err != nil {
			for _, o := range out {
				_ = o.Close()
			}
			return nil, fmt.Errorf("verifier: %w", &model.PackageError{File: packageFile, Member: fmt.Sprintf("verifiers[%d]", i), Err: err})
		}
		out[s.ID] = v
	}
	return out, nil
}

// OpenByID opens the verifier with the given id from a package.
func OpenByID(packageFile, id string, opts OpenOptions) (VerifyCloser, error) {
	specs, dir, err := ReadPackage(packageFile)
	if err != nil {
		return nil, err
	}
	opts.PackageDir = dir
	for _, s := range specs {
		if s.ID == id {
			return Open(s, opts)
		}
	}
	return nil, fmt.Errorf("verifier: package %s has no verifier %q", packageFile, id)
}

// OpenBinary opens a go-plugin verifier binary outside any package, pinned
// to pinned or, when pinned is empty, to the file's own current digest (an
// author trying the verifier being written). timeout bounds each call.
func OpenBinary(path, pinned string, timeout time.Duration) (*Process, error) {
	if pinned == "" {
		b, err := os.ReadFile(path)
		if err != nil {
			return nil, fmt.Errorf("verifier: binary %s: %w", path, err)
		}
		pinned = canonjson.DigestBytes(b)
	}
	return NewProcess(ProcessConfig{ID: filepath.Base(path), Path: path, SHA256: pinned, Timeout: timeout})
}
