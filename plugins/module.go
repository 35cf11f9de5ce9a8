package plugins

import (
	"crypto/subtle"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"

	"github.com/registrum/registrum/internal/canonjson"
	"github.com/registrum/registrum/model"
	"github.com/registrum/registrum/plugins/contract"
)

// Module is one reviewed module to load: its package entry and, when the
// caller has them, the rules the package declares for its outputs.
type Module struct {
	model.Module

	// Writes, when not nil, are a planner's declared writes; every effect of
	// its plans must fit one of them.
	Writes []contract.Write
	// ActionWrites, when not nil, are an action handler's declared writes.
	ActionWrites []contract.DeclaredActionWrite
	// Refusals, when not nil, are the refusal codes an action handler may use.
	Refusals []string
}

// maxModuleBytes bounds a module file: WebAssembly modules built from Go are
// a few MiB.
const maxModuleBytes = 64 << 20

// check validates the module's declaration, without touching its file.
func (m Module) check() error {
	switch {
	case m.ID == "":
		return errors.New("id is empty")
	case !m.Engine.Valid():
		return fmt.Errorf("engine %q is not wasm or tengo", m.Engine)
	case !m.Kind.Valid():
		return fmt.Errorf("kind %q is not planner, hook-handler or action-handler", m.Kind)
	case m.Path == "":
		return errors.New("path is empty")
	case filepath.IsAbs(m.Path) || !filepath.IsLocal(filepath.FromSlash(m.Path)):
		return fmt.Errorf("path %q must be relative and stay inside the package folder", m.Path)
	case !validDigest(m.SHA256):
		return fmt.Errorf("sha256 %q is not of the form sha256:<64 lowercase hex>", m.SHA256)
	case m.Kind == model.KindPlanner && len(m.Capabilities) > 0:
		return errors.New("a planner is a pure function of its request: it may have no capabilities")
	}
	for _, c := range m.Capabilities {
		if !c.Valid() {
			return fmt.Errorf("capability %q is not clock or random", c)
		}
	}
	return nil
}

// has reports whether the module was granted c.
func (m Module) has(c model.Capability) bool { return slices.Contains(m.Capabilities, c) }

func validDigest(d string) bool {
	hex, ok := strings.CutPrefix(d, "sha256:")
	if !ok || len(hex) != 64 {
		return false
	}
	for _, c := range hex {
		if !(c >= '0' && c <= '9' || c >= 'a' && c <= 'f') {
			return false
		}
	}
	return true
}

// readPinned reads the module's file under baseDir and checks it hashes to
// the pinned digest.
func (m Module) readPinned(baseDir string) ([]byte, error) {
	path := filepath.Join(baseDir, filepath.FromSlash(m.Path))
	info, err := os.Stat(path)
	if err != nil {
		return nil, fmt.Errorf("read %s: %w", path, err)
	}
	if !info.Mode().IsRegular() {
		return nil, fmt.Errorf("read %s: not a regular file", path)
	}
	if info.Size() > maxModuleBytes {
		return nil, fmt.Errorf("read %s: %d bytes is over the %d-byte module limit", path, info.Size(), maxModuleBytes)
	}
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("read %s: %w", path, err)
	}
	got := canonjson.DigestBytes(b)
	if subtle.ConstantTimeCompare([]byte(got), []byte(m.SHA256)) != 1 {
		return nil, fmt.Errorf("%s hashes to %s but the package pins %s: the file is not the reviewed module", path, got, m.SHA256)
	}
	return b, nil
}
