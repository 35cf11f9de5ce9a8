// Package source reads an authored YAML or JSON document into a plain JSON
// value and remembers where every key and item was written, so findings can
// name the file, line and key path of what they are about.
package source

import (
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
	"strings"

	"github.com/goccy/go-yaml"
	"github.com/goccy/go-yaml/ast"
	"github.com/goccy/go-yaml/parser"
)

// Position is a line and column, both counted from 1.
type Position struct {
	Line   int
	Column int
}

// Document is a parsed source document.
type Document struct {
	// Value is the document as plain JSON values (maps, slices, strings,
	// float64 or json.Number-free numbers, booleans, nil).
	Value any
	// JSON is Value encoded as JSON.
	JSON []byte
	pos  map[string]Position
}

// SyntaxError is a document that cannot be read, with where.
type SyntaxError struct {
	Pos     Position
	Message string
}

// Error formats the error as line:column: message.
func (e *SyntaxError) Error() string {
	return fmt.Sprintf("%d:%d: %s", e.Pos.Line, e.Pos.Column, e.Message)
}

// Parse reads a YAML (or JSON) document with exactly one document in it.
// Duplicate keys are refused.
func Parse(raw []byte) (*Document, error) {
	f, err := parser.ParseBytes(raw, 0)
	if err != nil {
		return nil, yamlError(err)
	}
	if len(f.Docs) != 1 || f.Docs[0].Body == nil {
		return nil, &SyntaxError{Pos: Position{1, 1}, Message: "the file must hold exactly one document"}
	}
	body := f.Docs[0].Body
	d := &Document{pos: map[string]Position{"": {1, 1}}}
	d.walk("", body)
	var v any
	if err := yaml.NodeToValue(body, &v); err != nil {
		return nil, yamlError(err)
	}
	v, err = plain(v)
	if err != nil {
		return nil, &SyntaxError{Pos: Position{1, 1}, Message: err.Error()}
	}
	d.Value = v
	if d.JSON, err = json.Marshal(v); err != nil {
		return nil, &SyntaxError{Pos: Position{1, 1}, Message: err.Error()}
	}
	return d, nil
}

func yamlError(err error) error {
	var ye yaml.Error
	if errors.As(err, &ye) && ye.GetToken() != nil {
		p := ye.GetToken().Position
		return &SyntaxError{Pos: Position{p.Line, p.Column}, Message: ye.GetMessage()}
	}
	return &SyntaxError{Pos: Position{1, 1}, Message: err.Error()}
}

// walk records the position of every mapping key and sequence item under
// its key path (a.b[0].c).
func (d *Document) walk(path string, n ast.Node) {
	switch n := n.(type) {
	case *ast.MappingNode:
		d.mark(path, n)
		for _, mv := range n.Values {
			d.mappingValue(path, mv)
		}
	case *ast.MappingValueNode:
		d.mark(path, n)
		d.mappingValue(path, n)
	case *ast.SequenceNode:
		d.mark(path, n)
		for i, item := range n.Values {
			p := path + "[" + strconv.Itoa(i) + "]"
			d.mark(p, item)
			d.walk(p, item)
		}
	case *ast.TagNode:
		d.walk(path, n.Value)
	case *ast.AnchorNode:
		d.walk(path, n.Value)
	}
}

func (d *Document) mappingValue(path string, mv *ast.MappingValueNode) {
	key := strings.Trim(mv.Key.String(), `"'`)
	p := key
	if path != "" {
		p = path + "." + key
	}
	d.mark(p, mv.Key)
	d.walk(p, mv.Value)
}

func (d *Document) mark(path string, n ast.Node) {
	if _, seen := d.pos[path]; seen || n == nil || n.GetToken() == nil {
		return
	}
	t := n.GetToken()
	d.pos[path] = Position{Line: t.Position.Line, Column: t.Position.Column}
}

// Locate returns where the key path was written, or where its nearest
// written ancestor was (the document start when none was).
func (d *Document) Locate(path string) Position {
	for {
		if p, ok := d.pos[path]; ok {
			return p
		}
		if path == "" {
			return Position{1, 1}
		}
		path = Parent(path)
	}
}

// Parent returns the key path one level up ("" at the top).
func Parent(path string) string {
	i := strings.LastIndexAny(path, ".[")
	if i < 0 {
		return ""
	}
	return path[:i]
}

// plain turns decoded YAML values into JSON values, refusing non-string keys.
func plain(v any) (any, error) {
	switch v := v.(type) {
	case map[string]any:
		for k, e := range v {
			p, err := plain(e)
			if err != nil {
				return nil, err
			}
			v[k] = p
		}
		return v, nil
	case map[any]any:
		return nil, errors.New("mapping keys must be strings")
	case []any:
		for i, e := range v {
			p, err := plain(e)
			if err != nil {
				return nil, err
			}
			v[i] = p
		}
		return v, nil
	case uint64:
		return json.Number(strconv.FormatUint(v, 10)), nil
	case int64:
		return json.Number(strconv.FormatInt(v, 10)), nil
	case int:
		return json.Number(strconv.Itoa(v)), nil
	case float64:
		return v, nil
	case string, bool, nil, json.Number:
		return v, nil
	default:
		return fmt.Sprint(v), nil
	}
}

// Has reports whether the key path was written in the document.
func (d *Document) Has(path string) bool {
	_, ok := d.pos[path]
	return ok
}
