package dev

import (
	"errors"
	"fmt"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"strings"

	"github.com/registrum/registrum/internal/secrets"
	"github.com/registrum/registrum/internal/strictyaml"
)

// maxFragmentBytes bounds an operator's configuration fragment.
const maxFragmentBytes = 1 << 20

// fragment is a file of the operator's own runtime configuration blocks
// (--event-destinations, --review-config) that dev places into the record
// host's generated configuration, and whose faults it reports against that
// file rather than the generated one.
type fragment struct {
	// flag is the command-line flag that named the file.
	flag string
	// path is the file as given.
	path string
	// keys are the top-level keys the file may hold.
	keys []string
	// text is the block as placed in the configuration: a blank line, then
	// the file's lines after the shift lines dev put before them.
	text string
	// shift is the number of lines dev put before the file's first line.
	shift int
}

// readFragment reads the file at path given with flag. It refuses a file
// that is not YAML, a top-level key outside keys (the file holds only the
// blocks it is for), and a secret reference (a key ending in Ref) that does
// not resolve under secretsRoot, where the record host will look it up;
// each refusal names the file and the line. defaults are top-level lines
// dev puts before the file's lines for a key of keys the file does not
// give.
func readFragment(flag, path string, keys []string, secretsRoot string, defaults map[string]string) (*fragment, error) {
	doc, err := strictyaml.ReadFile(path, strictyaml.ConfigLimits(maxFragmentBytes))
	if err != nil {
		return nil, fmt.Errorf("dev: %s: %w", flag, err)
	}
	v, err := doc.Value()
	if err != nil {
		return nil, fmt.Errorf("dev: %s: %w", flag, err)
	}
	top, ok := v.(map[string]any)
	if !ok {
		return nil, fmt.Errorf("dev: %s: %w", flag, doc.Fail("", "must be a mapping of "+strings.Join(keys, ", "), nil))
	}
	for _, k := range slices.Sorted(maps.Keys(top)) {
		if !slices.Contains(keys, k) {
			return nil, fmt.Errorf("dev: %s: %w", flag, doc.Fail(k, "is not a key this file may hold ("+strings.Join(keys, ", ")+")", nil))
		}
	}
	if err := checkSecretRefs(doc, "", top, secretsRoot); err != nil {
		return nil, fmt.Errorf("dev: %s: %w", flag, err)
	}
	raw, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("dev: %s: %w", flag, err)
	}
	f := &fragment{flag: flag, path: path, keys: keys}
	var prefix []string
	for _, k := range slices.Sorted(maps.Keys(defaults)) {
		if _, given := top[k]; !given {
			prefix = append(prefix, defaults[k])
		}
	}
	f.shift = len(prefix)
	f.text = "\n" + strings.Join(append(prefix, strings.TrimRight(string(raw), "\n")), "\n") + "\n"
	return f, nil
}

// checkSecretRefs resolves every secret reference under v (a value at key
// path at of doc): a string under a key ending in Ref.
func checkSecretRefs(doc *strictyaml.Document, at string, v any, root string) error {
	m, ok := v.(map[string]any)
	if !ok {
		return nil
	}
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	for _, k := range keys {
		path := k
		if at != "" {
			path = at + "." + k
		}
		if ref, isRef := m[k].(string); isRef && strings.HasSuffix(k, "Ref") {
			if _, err := secrets.ResolveFile(root, ref); err != nil {
				return doc.Fail(path, fmt.Sprintf("the secret does not resolve (dev reads secrets from %s)", root), err)
			}
			continue
		}
		if err := checkSecretRefs(doc, path, m[k], root); err != nil {
			return err
		}
	}
	return nil
}

// blame returns err naming the fragment's file, at its line, when err
// refuses a key of the fragment in the configuration at cfgPath (the
// generated registrum.yaml the user never wrote). Any other error, or a nil
// fragment, returns err as it is.
func (f *fragment) blame(err error, cfgPath string) error {
	var se *strictyaml.Error
	if f == nil || !errors.As(err, &se) || !slices.ContainsFunc(f.keys, func(k string) bool { return se.Path == k || strings.HasPrefix(se.Path, k+".") }) {
		return err
	}
	own := *se
	own.File, own.Pos = f.path, strictyaml.Position{}
	if raw, rerr := os.ReadFile(cfgPath); rerr == nil && se.Pos.Line > 0 {
		if at := strings.Index(string(raw), f.text); at >= 0 {
			// The file's first line follows the blank line and the shift.
			first := strings.Count(string(raw[:at]), "\n") + 2 + f.shift
			if line := se.Pos.Line - first + 1; line >= 1 {
				own.Pos = strictyaml.Position{Line: line, Column: se.Pos.Column}
			}
		}
	}
	if strings.HasSuffix(se.Path, "Ref") {
		own.Message += " (dev reads secrets from " + filepath.Join(filepath.Dir(cfgPath), "secrets") + ")"
	}
	return fmt.Errorf("dev: %s: %w", f.flag, &own)
}
