package project

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"sort"

	"github.com/registrum/registrum/internal/canonjson"
	"github.com/registrum/registrum/model"
	"github.com/registrum/registrum/project/generate"
)

// finish generates the artifacts, lists every file with its digest, sets
// the schema fingerprint and the revision.
func (c *compiler) finish(pkg *model.Package) (*Result, error) {
	gen, err := generate.All(pkg)
	if err != nil {
		return nil, fmt.Errorf("project: generate artifacts: %w", err)
	}
	for _, path := range slices.Sorted(maps.Keys(gen)) {
		role := generate.Role(path)
		if role == "" {
			return nil, fmt.Errorf("project: generated file %s has no role", path)
		}
		if _, clash := c.contents[path]; clash {
			return nil, fmt.Errorf("project: generated file %s collides with a source file", path)
		}
		c.contents[path] = gen[path]
		c.files = append(c.files, model.File{Path: path, Role: role})
	}
	for i := range c.files {
		c.files[i].SHA256 = canonjson.DigestBytes(c.contents[c.files[i].Path])
	}
	sort.Slice(c.files, func(i, j int) bool { return c.files[i].Path < c.files[j].Path })
	pkg.Files = c.files
	if pkg.SchemaFingerprint, err = c.opts.Fingerprint(pkg); err != nil {
		return nil, fmt.Errorf("project: schema fingerprint: %w", err)
	}
	if pkg.Revision, err = model.ComputeRevision(pkg); err != nil {
		return nil, fmt.Errorf("project: %w", err)
	}
	warnings, err := c.unserved(pkg)
	if err != nil {
		return nil, err
	}
	warnings = append(warnings, c.ungranted(pkg)...).sorted()
	return &Result{Package: pkg, Contents: c.contents, Warnings: warnings}, nil
}

// PackageDocument returns the bytes of package.json: the package model as
// indented JSON with a final newline.
func (r *Result) PackageDocument() ([]byte, error) {
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetEscapeHTML(false)
	enc.SetIndent("", "  ")
	if err := enc.Encode(r.Package); err != nil {
		return nil, fmt.Errorf("project: encode package: %w", err)
	}
	return buf.Bytes(), nil
}

// Write stores the package in dir. dir must not exist, be empty, or hold an
// earlier package (a package.json), which is replaced as a whole: the new
// package is written beside it and renamed into place.
func (r *Result) Write(dir string) error {
	doc, err := r.PackageDocument()
	if err != nil {
		return err
	}
	dir = filepath.Clean(dir)
	if entries, err := os.ReadDir(dir); err == nil && len(entries) > 0 {
		if _, err := os.Stat(filepath.Join(dir, model.FileName)); err != nil {
			return fmt.Errorf("project: %s is not empty and holds no package; refusing to overwrite it", dir)
		}
	} else if err != nil && !errors.Is(err, os.ErrNotExist) {
		return fmt.Errorf("project: %w", err)
	}
	if err := os.MkdirAll(filepath.Dir(dir), 0o755); err != nil {
		return fmt.Errorf("project: %w", err)
	}
	tmp, err := os.MkdirTemp(filepath.Dir(dir), "."+filepath.Base(dir)+".tmp-")
	if err != nil {
		return fmt.Errorf("project: %w", err)
	}
	defer os.RemoveAll(tmp)
	mode := map[string]os.FileMode{}
	for _, f := range r.Package.Files {
		if f.Role == RoleVerifier {
			mode[f.Path] = 0o755
		}
	}
	for path, b := range r.Contents {
		full := filepath.Join(tmp, filepath.FromSlash(path))
		if err := os.MkdirAll(filepath.Dir(full), 0o755); err != nil {
			return fmt.Errorf("project: %w", err)
		}
		perm := mode[path]
		if perm == 0 {
			perm = 0o644
		}
		if err := os.WriteFile(full, b, perm); err != nil {
			return fmt.Errorf("project: %w", err)
		}
	}
	if err := os.WriteFile(filepath.Join(tmp, model.FileName), doc, 0o644); err != nil {
		return fmt.Errorf("project: %w", err)
	}
	if err := os.Chmod(tmp, 0o755); err != nil {
		return fmt.Errorf("project: %w", err)
	}
	if err := os.RemoveAll(dir); err != nil {
		return fmt.Errorf("project: replace %s: %w", dir, err)
	}
	if err := os.Rename(tmp, dir); err != nil {
		return fmt.Errorf("project: %w", err)
	}
	return nil
}
