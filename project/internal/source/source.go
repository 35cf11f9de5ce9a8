// Package source reads an authored YAML or JSON document into a plain JSON
// value and remembers where every key and item was written, so findings can
// name the file, line and key path of what they are about. The reading is
// internal/strictyaml's; this package adds the document's JSON form.
package source

import (
	"encoding/json"
	"fmt"

	"github.com/registrum/registrum/internal/strictyaml"
)

// Position is a line and column, both counted from 1.
type Position = strictyaml.Position

// SyntaxError is a document that cannot be read, with where (Pos) and what
// (Message).
type SyntaxError = strictyaml.Error

// Document is a parsed source document.
type Document struct {
	// Value is the document as plain JSON values (maps, slices, strings,
	// json.Number integers, float64 fractions, booleans, nil).
	Value any
	// JSON is Value encoded as JSON.
	JSON []byte
	doc  *strictyaml.Document
}

// Budgets of a project document. The compiler expands every alias (into
// JSON, then through the format's schema), so the node budget, not the size,
// bounds its memory: a document just under MaxNodes compiles in well under
// 100 MiB, where the loader's default would let 16 KiB of aliases cost
// several hundred.
const (
	// MaxBytes bounds the document's size.
	MaxBytes = 4 << 20
	// MaxNodes bounds the document's nodes with every alias expanded.
	MaxNodes = 1 << 19
	// MaxAliases bounds the document's alias nodes.
	MaxAliases = 1000
)

// Limits are the strictyaml budgets of a project document.
var Limits = strictyaml.Limits{MaxBytes: MaxBytes, MaxNodes: MaxNodes, MaxAliases: MaxAliases}

// Parse reads a YAML (or JSON) document with exactly one document in it,
// within Limits. Duplicate keys are refused.
func Parse(raw []byte) (*Document, error) {
	doc, err := strictyaml.Parse("", raw, Limits)
	if err != nil {
		return nil, err
	}
	v, err := doc.Value()
	if err != nil {
		return nil, err
	}
	d := &Document{Value: v, doc: doc}
	if d.JSON, err = json.Marshal(v); err != nil {
		return nil, &SyntaxError{Pos: Position{Line: 1, Column: 1}, Message: fmt.Sprintf("cannot encode the document as JSON: %v", err)}
	}
	return d, nil
}

// Locate returns where the key path was written, or where its nearest
// written ancestor was (the document start when none was).
func (d *Document) Locate(path string) Position { return d.doc.Locate(path) }

// Has reports whether the key path was written in the document.
func (d *Document) Has(path string) bool { return d.doc.Has(path) }

// Parent returns the key path one level up ("" at the top).
func Parent(path string) string { return strictyaml.Parent(path) }
