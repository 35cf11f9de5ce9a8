package model

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"

	"github.com/registrum/registrum/internal/canonjson"
)

// ComputeRevision returns the revision of p: the sha256 digest of the
// canonical form of p with its Revision member left out.
func ComputeRevision(p *Package) (string, error) {
	c := *p
	c.Revision = ""
	d, err := canonjson.Digest(&c)
	if err != nil {
		return "", fmt.Errorf("model: package revision: %w", err)
	}
	return d, nil
}

// Load reads the package at path (a package folder or its package.json),
// checks its format, its revision and the digest of every file it lists.
func Load(path string) (*Package, error) {
	file, raw, err := readDocument(path)
	if err != nil {
		return nil, err
	}
	p, err := Decode(raw)
	if err != nil {
		return nil, &PackageError{File: file, Err: err}
	}
	dir := filepath.Dir(file)
	for _, f := range p.Files {
		b, err := os.ReadFile(filepath.Join(dir, filepath.FromSlash(f.Path)))
		if err != nil {
			return nil, &PackageError{File: file, Member: "file " + f.Path, Err: err}
		}
		if got := canonjson.DigestBytes(b); got != f.SHA256 {
			return nil, &PackageError{File: file, Member: "file " + f.Path, Err: fmt.Errorf("digest %s, the package pins %s", got, f.SHA256)}
		}
	}
	return p, nil
}

// Decode parses a package document strictly and checks its format and revision.
func Decode(raw []byte) (*Package, error) {
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.DisallowUnknownFields()
	// Literal values (checks, conditions, effects) keep their exact digits, so
	// the revision recomputed here matches the one the compiler wrote.
	dec.UseNumber()
	var p Package
	if err := dec.Decode(&p); err != nil {
		return nil, fmt.Errorf("decode: %w", err)
	}
	if p.Format != Format {
		return nil, fmt.Errorf("format is %q, this host reads %q", p.Format, Format)
	}
	if p.Revision == "" {
		return nil, errors.New("the package has no revision")
	}
	want, err := ComputeRevision(&p)
	if err != nil {
		return nil, err
	}
	if want != p.Revision {
		return nil, fmt.Errorf("revision %s does not match the content (%s): the package was modified after compilation", p.Revision, want)
	}
	return &p, nil
}
