// Package project reads a registry author's project (registry.yaml and the
// scripts and modules it names), enforces every compile-time rule of the
// record service specification, and compiles it into a package: one
// immutable, content-addressed folder the record host serves from.
//
// Compile returns either a Result or Findings, the complete list of broken
// rules, each naming the file, line and key path. Result.Write stores the
// package. Compiling the same project twice gives byte-identical packages.
package project

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"

	"github.com/registrum/registrum/model"
	"github.com/registrum/registrum/project/internal/source"
)

// ProjectFileNames are the names a project document may have, in the order
// they are looked for; a project folder holds exactly one of them.
var ProjectFileNames = []string{"registry.yaml", "registry.yml", "registry.json"}

// MaxProjectBytes bounds the size of the project document.
const MaxProjectBytes = source.MaxBytes

// MaxModuleBytes bounds the size of one script, module or verifier binary.
const MaxModuleBytes = 64 << 20

// Options select how a project is compiled.
type Options struct {
	// Production adds the production rules: a handler for every hook and a
	// pinned sha256 digest for every module and verifier binary.
	Production bool
	// Fingerprint computes the package's schema fingerprint, the digest of
	// the database layout its entities need (the store's layout.Fingerprint
	// for a package the host will serve). The compiler stays pure: it
	// neither knows nor imports the store. Required: the host refuses to
	// open a database whose layout differs from the one the package
	// records, so Compile fails without it.
	Fingerprint func(*model.Package) (string, error)
}

// ErrNoFingerprint is returned by Compile when Options.Fingerprint is nil.
var ErrNoFingerprint = errors.New("project: no schema fingerprint function (Options.Fingerprint)")

// Result is a compiled package, ready to be written.
type Result struct {
	// Package is the resolved model, revision included.
	Package *model.Package
	// Contents maps every package-relative file path listed in
	// Package.Files to its bytes.
	Contents map[string][]byte
	// Warnings are findings of severity warning, in file and line order:
	// the project compiles, but declares what this release's record host
	// does not serve yet (left out of openapi.json). Commands print them.
	Warnings Findings
}

// Folder returns the project folder path names: path itself when it is a
// folder, or the folder of a project document (registry.yaml,
// registry.yml or registry.json) named directly. Any other file is refused
// with a message asking for the project folder.
func Folder(path string) (string, error) {
	st, err := os.Stat(path)
	if err != nil {
		return "", err
	}
	if st.IsDir() {
		return path, nil
	}
	for _, n := range ProjectFileNames {
		if filepath.Base(path) == n {
			return filepath.Dir(path), nil
		}
	}
	return "", fmt.Errorf("%s is a file, not a project folder: give the project folder (the one holding %s)", path, strings.Join(ProjectFileNames, ", "))
}

// Compile reads the project in dir and compiles it. When the project breaks
// rules the error is Findings, holding all of them; other errors are I/O
// faults.
func Compile(dir string, opts Options) (*Result, error) {
	name, raw, err := readProject(dir)
	if err != nil {
		return nil, err
	}
	return compileDocument(dir, name, raw, opts)
}

// compileDocument compiles the project document raw, named name, whose
// referenced files are read from dir.
func compileDocument(dir, name string, raw []byte, opts Options) (*Result, error) {
	if opts.Fingerprint == nil {
		return nil, ErrNoFingerprint
	}
	c := &compiler{dir: dir, file: name, opts: opts, contents: map[string][]byte{}}
	doc, err := source.Parse(raw)
	if err != nil {
		var se *source.SyntaxError
		if errors.As(err, &se) {
			return nil, Findings{{File: name, Line: se.Pos.Line, Column: se.Pos.Column, Rule: "format.syntax", Message: se.Message}}
		}
		return nil, fmt.Errorf("project: %s: %w", name, err)
	}
	c.doc = doc
	issues, err := validateFormat(doc.JSON)
	if err != nil {
		return nil, err
	}
	onlyUnknownKeys := true
	for _, is := range issues {
		c.add(is.path, "format.schema", "%s", is.message)
		onlyUnknownKeys = onlyUnknownKeys && is.unknownKey
	}
	if len(c.findings) > 0 && !onlyUnknownKeys {
		// The document does not have the format's shape. The rules below
		// still run on what does (the faulty values left out), so every
		// finding of the project comes in one run; a finding inside a
		// value the schema already refused would only repeat it.
		c.semanticDespite(doc.JSON, issues)
		return nil, c.findings.sorted()
	}
	// Unknown keys aside, the document has the format's shape, so every
	// rule can still be checked and reported in the same run.
	proj, err := decodeProject(doc.JSON, len(c.findings) == 0)
	if err != nil {
		c.add("", "format.schema", "%v", err)
		return nil, c.findings.sorted()
	}
	c.proj = proj
	c.contents["source/"+name] = raw
	c.files = append(c.files, model.File{Path: "source/" + name, Role: "source"})
	pkg := c.resolve()
	if len(c.findings) > 0 {
		return nil, c.findings.sorted()
	}
	return c.finish(pkg)
}

func readProject(dir string) (string, []byte, error) {
	var found []string
	for _, n := range ProjectFileNames {
		if st, err := os.Stat(filepath.Join(dir, n)); err == nil && st.Mode().IsRegular() {
			found = append(found, n)
		}
	}
	switch len(found) {
	case 0:
		return "", nil, fmt.Errorf("%s holds no project document (%s); give the project folder", dir, strings.Join(ProjectFileNames, ", "))
	case 1:
	default:
		return "", nil, fmt.Errorf("%s holds several project documents (%s); keep one", dir, strings.Join(found, ", "))
	}
	raw, err := readBounded(filepath.Join(dir, found[0]), MaxProjectBytes)
	if err != nil {
		return "", nil, fmt.Errorf("project: %w", err)
	}
	return found[0], raw, nil
}

func readBounded(path string, limit int64) ([]byte, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	st, err := f.Stat()
	if err != nil {
		return nil, err
	}
	if !st.Mode().IsRegular() {
		return nil, fmt.Errorf("%s is not a regular file", path)
	}
	if st.Size() > limit {
		return nil, fmt.Errorf("%s is %d bytes, more than the %d allowed", path, st.Size(), limit)
	}
	b := make([]byte, st.Size())
	if _, err := f.ReadAt(b, 0); err != nil && st.Size() > 0 {
		return nil, fmt.Errorf("read %s: %w", path, err)
	}
	return b, nil
}

// compiler holds the state of one compilation.
type compiler struct {
	dir      string
	file     string
	opts     Options
	doc      *source.Document
	proj     *Project
	findings Findings
	pkg      *model.Package
	files    []model.File
	contents map[string][]byte
}

// add records a finding at the key path.
func (c *compiler) add(path, rule, format string, args ...any) {
	pos := c.doc.Locate(path)
	c.findings = append(c.findings, Finding{
		File: c.file, Line: pos.Line, Column: pos.Column, Path: path, Rule: rule,
		Message: fmt.Sprintf(format, args...),
	})
}
