package model

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"path/filepath"

	"github.com/registrum/registrum/internal/strictjson"
)

// MaxPackageBytes bounds a package document read from disk.
const MaxPackageBytes = 64 << 20

// PackageError is the error of every read of a package document: File is
// the document, Member the part at fault ("" for the document as a whole,
// for example "modules" or "verifiers[2]"), Err the cause.
type PackageError struct {
	// File is the package document's path.
	File string
	// Member names the part of the document at fault, or is empty.
	Member string
	// Err is the cause.
	Err error
}

// Error returns "model: package <file>: [<member>: ]<cause>".
func (e *PackageError) Error() string {
	if e.Member == "" {
		return fmt.Sprintf("model: package %s: %v", e.File, e.Err)
	}
	return fmt.Sprintf("model: package %s: %s: %v", e.File, e.Member, e.Err)
}

// Unwrap returns the cause.
func (e *PackageError) Unwrap() error { return e.Err }

// readDocument reads the package document at path (a package folder or its
// package.json), refusing one over MaxPackageBytes. It returns the
// document's path and bytes.
func readDocument(path string) (string, []byte, error) {
	file := path
	if st, err := os.Stat(path); err == nil && st.IsDir() {
		file = filepath.Join(path, FileName)
	}
	f, err := os.Open(file)
	if err != nil {
		return file, nil, &PackageError{File: file, Err: err}
	}
	defer f.Close()
	raw, err := io.ReadAll(io.LimitReader(f, MaxPackageBytes+1))
	if err != nil {
		return file, nil, &PackageError{File: file, Err: err}
	}
	if len(raw) > MaxPackageBytes {
		return file, nil, &PackageError{File: file, Err: fmt.Errorf("larger than %d bytes", MaxPackageBytes)}
	}
	return file, raw, nil
}

// ReadModules reads only the "modules" member of the package document at
// path (a package folder or its package.json): every entry strictly (unknown
// and repeated members refused), the rest of the document ignored, its
// revision not checked. A deployment check uses it to look at exactly what
// it checks. It returns the modules and the folder their paths are relative
// to.
func ReadModules(path string) ([]Module, string, error) {
	return readMember[Module](path, "modules")
}

// ReadVerifiers reads only the "verifiers" member of the package document at
// path, as [ReadModules] reads "modules". It decodes the entries; their
// shape (which members each kind takes) is checked by plugins/verifier.
func ReadVerifiers(path string) ([]Verifier, string, error) {
	return readMember[Verifier](path, "verifiers")
}

// readMember decodes one top-level array member of a package document.
func readMember[T any](path, member string) ([]T, string, error) {
	file, raw, err := readDocument(path)
	if err != nil {
		return nil, "", err
	}
	var doc map[string]json.RawMessage
	if err := json.Unmarshal(raw, &doc); err != nil {
		return nil, "", &PackageError{File: file, Err: err}
	}
	dir := filepath.Dir(file)
	value := doc[member]
	if len(value) == 0 || bytes.Equal(value, []byte("null")) {
		return nil, dir, nil
	}
	if _, err := strictjson.Decode(value); err != nil {
		return nil, "", &PackageError{File: file, Member: member, Err: err}
	}
	var out []T
	dec := json.NewDecoder(bytes.NewReader(value))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&out); err != nil {
		return nil, "", &PackageError{File: file, Member: member, Err: err}
	}
	return out, dir, nil
}
