// Package strictyaml is the one strict YAML loader: it reads exactly one
// document within size, node and alias budgets, refuses duplicate keys,
// unknown keys and strings or fractions where integers are expected, and
// reports every refusal as an *Error naming the file, line, column and key
// path (such as "clients[2].keys[0].kid").
//
// A document is parsed once (Parse or ReadFile) and then either decoded into
// a Go value (Document.Decode) or read as a plain JSON-like tree
// (Document.Value); the positions of every key and item stay available for
// later refusals (Document.Locate, Document.Fail).
package strictyaml

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math"
	"os"
	"regexp"
	"strconv"
	"strings"

	"github.com/goccy/go-yaml"
	"github.com/goccy/go-yaml/ast"
	"github.com/goccy/go-yaml/parser"
	"github.com/goccy/go-yaml/token"
)

// Default budgets, used for every zero field of Limits.
const (
	// DefaultMaxBytes bounds the size of a document.
	DefaultMaxBytes = 8 << 20
	// DefaultMaxNodes bounds the nodes of a document once every alias is
	// expanded: about what an 8 MiB document without aliases can hold, so
	// aliases never make a document costlier than the largest plain one.
	DefaultMaxNodes = 4 << 20
	// DefaultMaxAliases bounds the alias nodes (*name) of a document.
	DefaultMaxAliases = 10000
	// DefaultMaxDepth bounds the nesting of mappings and sequences.
	DefaultMaxDepth = 256
)

// Limits are the budgets a document must keep. A zero field takes its
// default.
type Limits struct {
	// MaxBytes bounds the document's size in bytes.
	MaxBytes int64
	// MaxNodes bounds the document's nodes with every alias expanded, which
	// refuses "billion laughs" documents before anything expands them.
	MaxNodes int64
	// MaxAliases bounds the number of alias nodes.
	MaxAliases int64
	// MaxDepth bounds the nesting of mappings and sequences.
	MaxDepth int
}

// Budgets of a configuration file (a service's config, a client
// registration): far more than any real one holds, far less than the
// defaults, which are sized for authored documents.
const (
	// ConfigMaxNodes bounds a configuration's nodes, aliases expanded.
	ConfigMaxNodes = 1 << 16
	// ConfigMaxAliases bounds a configuration's alias nodes.
	ConfigMaxAliases = 1 << 10
	// ConfigMaxDepth bounds a configuration's nesting.
	ConfigMaxDepth = 32
)

// ConfigLimits are the budgets of a configuration file of at most maxBytes.
func ConfigLimits(maxBytes int64) Limits {
	return Limits{MaxBytes: maxBytes, MaxNodes: ConfigMaxNodes, MaxAliases: ConfigMaxAliases, MaxDepth: ConfigMaxDepth}
}

func (l Limits) withDefaults() Limits {
	if l.MaxBytes <= 0 {
		l.MaxBytes = DefaultMaxBytes
	}
	if l.MaxNodes <= 0 {
		l.MaxNodes = DefaultMaxNodes
	}
	if l.MaxAliases <= 0 {
		l.MaxAliases = DefaultMaxAliases
	}
	if l.MaxDepth <= 0 {
		l.MaxDepth = DefaultMaxDepth
	}
	return l
}

// Position is a line and column, both counted from 1; zero when unknown.
type Position struct {
	// Line is the line, from 1.
	Line int
	// Column is the column, from 1.
	Column int
}

// Error is a refused document or a refused value in it.
type Error struct {
	// File names the document; empty when it was parsed from bytes without
	// a name.
	File string
	// Pos is where the refused key or item was written, or zero.
	Pos Position
	// Path is the key path, such as "listener.port" or "keys[2].kid";
	// empty when the whole document is at fault.
	Path string
	// Message says what is wrong or what the value must be.
	Message string
	// Err is the underlying cause, if any.
	Err error
}

// Error formats the refusal as "FILE:LINE: PATH: MESSAGE: CAUSE", leaving
// out what is unknown; without a file the place is "LINE:COLUMN".
func (e *Error) Error() string {
	var b strings.Builder
	switch {
	case e.File != "" && e.Pos.Line > 0:
		fmt.Fprintf(&b, "%s:%d", e.File, e.Pos.Line)
	case e.File != "":
		b.WriteString(e.File)
	case e.Pos.Line > 0:
		fmt.Fprintf(&b, "%d:%d", e.Pos.Line, e.Pos.Column)
	}
	for _, part := range []string{e.Path, e.Message} {
		if part == "" {
			continue
		}
		if b.Len() > 0 {
			b.WriteString(": ")
		}
		b.WriteString(part)
	}
	if e.Err != nil {
		if b.Len() > 0 {
			b.WriteString(": ")
		}
		b.WriteString(e.Err.Error())
	}
	return b.String()
}

// Unwrap returns the underlying cause.
func (e *Error) Unwrap() error { return e.Err }

// Document is one parsed YAML document with the position of every key and
// sequence item, by key path.
type Document struct {
	file string
	root ast.Node
	pos  map[string]Position
	// paths maps the token of every key, item and value to its key path,
	// to name the path of the decoder's refusals.
	paths map[*token.Token]string
	// anchors holds the node of every anchor, by name, to check an alias's
	// value against its key's type.
	anchors map[string]ast.Node
	// origins names where a key path's value came from when it was not the
	// document (an environment variable), by key path.
	origins map[string]string
}

// SetOrigin records that the value at the key path came from origin (such
// as "environment variable REGISTRUM_CONFIG_LISTENER_PORT") rather than from
// the document: a later refusal of that path names origin instead of a line
// of the file.
func (d *Document) SetOrigin(path, origin string) {
	if d.origins == nil {
		d.origins = map[string]string{}
	}
	d.origins[path] = origin
}

// ReadFile reads and parses the regular file at path, refusing one larger
// than lim.MaxBytes before reading it. The file is named by path in errors.
func ReadFile(path string, lim Limits) (*Document, error) {
	lim = lim.withDefaults()
	f, err := os.Open(path)
	if err != nil {
		return nil, &Error{File: path, Message: "cannot be read", Err: err}
	}
	defer f.Close()
	st, err := f.Stat()
	if err != nil {
		return nil, &Error{File: path, Message: "cannot be read", Err: err}
	}
	if !st.Mode().IsRegular() {
		return nil, &Error{File: path, Message: "must be a regular file"}
	}
	tooLarge := &Error{File: path, Message: fmt.Sprintf("is larger than %d bytes", lim.MaxBytes)}
	if st.Size() > lim.MaxBytes {
		return nil, tooLarge
	}
	// Read one byte past the budget: the file may have grown since Stat.
	data, err := io.ReadAll(io.LimitReader(f, lim.MaxBytes+1))
	if err != nil {
		return nil, &Error{File: path, Message: "cannot be read", Err: err}
	}
	if int64(len(data)) > lim.MaxBytes {
		return nil, tooLarge
	}
	return Parse(path, data, lim)
}

// Parse parses data, named file in errors (may be empty), as exactly one
// YAML (or JSON) document within lim. Duplicate keys are refused.
func Parse(file string, data []byte, lim Limits) (d *Document, err error) {
	lim = lim.withDefaults()
	if int64(len(data)) > lim.MaxBytes {
		return nil, &Error{File: file, Message: fmt.Sprintf("is larger than %d bytes", lim.MaxBytes)}
	}
	d = &Document{file: file, pos: map[string]Position{"": {1, 1}}, paths: map[*token.Token]string{}, anchors: map[string]ast.Node{}}
	defer func() {
		if r := recover(); r != nil {
			d, err = nil, &Error{File: file, Message: fmt.Sprintf("malformed YAML the decoder cannot read (%v)", r)}
		}
	}()
	f, err := parser.ParseBytes(data, 0)
	if err != nil {
		return nil, d.yamlError(err)
	}
	if len(f.Docs) != 1 || f.Docs[0].Body == nil {
		return nil, &Error{File: file, Pos: Position{1, 1}, Message: "the file must hold exactly one document"}
	}
	d.root = f.Docs[0].Body
	w := walker{d: d, lim: lim, anchors: map[string]int64{}}
	if _, err := w.walk("", d.root, 0); err != nil {
		return nil, err
	}
	return d, nil
}

// File returns the name the document was parsed under.
func (d *Document) File() string { return d.file }

// Decode decodes the document into the value v points to, refusing unknown
// keys, type mismatches and strings or fractions where integers are
// expected. A refusal is an *Error naming the key path.
func (d *Document) Decode(v any) (err error) {
	defer func() {
		if r := recover(); r != nil {
			err = &Error{File: d.file, Message: fmt.Sprintf("malformed YAML the decoder cannot read (%v)", r)}
		}
	}()
	if err := d.checkNumbers(v); err != nil {
		return err
	}
	if err := yaml.NodeToValue(d.root, v, yaml.Strict()); err != nil {
		return d.yamlError(err)
	}
	return nil
}

// Value returns the document as plain JSON values: map[string]any, []any,
// string, bool, nil, float64 and json.Number for integers. Mapping keys must
// be strings.
func (d *Document) Value() (v any, err error) {
	defer func() {
		if r := recover(); r != nil {
			v, err = nil, &Error{File: d.file, Pos: Position{1, 1}, Message: fmt.Sprintf("malformed YAML the decoder cannot read (%v)", r)}
		}
	}()
	if err := yaml.NodeToValue(d.root, &v); err != nil {
		return nil, d.yamlError(err)
	}
	v, err = plain(v)
	if err != nil {
		return nil, &Error{File: d.file, Pos: Position{1, 1}, Message: err.Error()}
	}
	return v, nil
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

// Has reports whether the key path was written in the document.
func (d *Document) Has(path string) bool {
	_, ok := d.pos[path]
	return ok
}

// Fail returns a refusal of the value at the key path (the whole document
// when empty), placed where the path, or its nearest written ancestor, was
// written.
func (d *Document) Fail(path, message string, err error) *Error {
	e := &Error{File: d.file, Path: path, Message: message, Err: err}
	if origin, ok := d.origins[path]; ok {
		e.File = origin
		return e
	}
	if path != "" {
		e.Pos = d.Locate(path)
	}
	return e
}

// Parent returns the key path one level up ("" at the top).
func Parent(path string) string {
	i := strings.LastIndexAny(path, ".[")
	if i < 0 {
		return ""
	}
	return path[:i]
}

// yamlError turns a goccy/go-yaml error into an *Error with its place and,
// where the token is one of the document's, its key path.
func (d *Document) yamlError(err error) *Error {
	var ye yaml.Error
	if errors.As(err, &ye) && ye.GetToken() != nil {
		t := ye.GetToken()
		return &Error{File: d.file, Pos: Position{t.Position.Line, t.Position.Column}, Path: d.paths[t], Message: plainMessage(ye.GetMessage())}
	}
	msg, _, _ := strings.Cut(err.Error(), "\n")
	return &Error{File: d.file, Message: plainMessage(msg)}
}

// The decoder's type refusals, worded in Go's terms; checkNode refuses
// nearly all of them first, plainMessage rewords the rest (behind an alias,
// say).
var (
	goTypeRefusal   = regexp.MustCompile(`^cannot unmarshal (.+?) into Go (?:struct field \S+ of type|value of type) (.+)$`)
	kindUsedRefusal = regexp.MustCompile(`^(\w+) was used where (\w+) is expected$`)
)

// plainMessage words a refusal of the decoder in the document's terms:
// which kind of value the key must hold, never a Go type.
func plainMessage(msg string) string {
	if m := goTypeRefusal.FindStringSubmatch(msg); m != nil {
		return kindRefusal(goKind(m[2]), goKind(m[1]))
	}
	if m := kindUsedRefusal.FindStringSubmatch(msg); m != nil {
		return kindRefusal(goKind(m[2]), goKind(m[1]))
	}
	return msg
}

func kindRefusal(want, got string) string {
	switch {
	case want == "":
		return "holds a value of the wrong kind"
	case got == "":
		return "must be " + want
	}
	return "must be " + want + ", not " + got
}

// goKind names the kind of value a Go type name (or a decoder's node name)
// stands for; empty when it is not plain.
func goKind(name string) string {
	name = strings.TrimLeft(name, "*")
	switch {
	case strings.HasPrefix(name, "[]"), name == "sequence":
		return aList
	case strings.HasPrefix(name, "map["), name == "mapping":
		return aMapping
	case strings.HasPrefix(name, "int"), strings.HasPrefix(name, "uint"):
		return anInt
	case strings.HasPrefix(name, "float"):
		return aNumber
	case name == "string":
		return aString
	case name == "bool":
		return aBool
	}
	return ""
}

// walker records positions and paths and keeps the budgets in one pass.
type walker struct {
	d       *Document
	lim     Limits
	aliases int64
	// anchors holds each anchor's expanded node count.
	anchors map[string]int64
}

// walk visits n at path and returns its node count with aliases expanded,
// capped at the budget plus one.
func (w *walker) walk(path string, n ast.Node, depth int) (int64, error) {
	if n == nil {
		return 0, nil
	}
	if depth > w.lim.MaxDepth {
		return 0, w.d.refuse(n, path, fmt.Sprintf("the document nests deeper than %d levels", w.lim.MaxDepth))
	}
	w.d.mark(path, n)
	size := int64(1)
	add := func(k int64) error {
		size = min(size+k, w.lim.MaxNodes+1)
		if size > w.lim.MaxNodes {
			return w.d.refuse(n, path, fmt.Sprintf("the document expands to more than %d nodes", w.lim.MaxNodes))
		}
		return nil
	}
	switch n := n.(type) {
	case *ast.MappingNode, *ast.MappingValueNode:
		for _, mv := range pairs(n) {
			k, err := w.mappingValue(path, mv, depth+1)
			if err != nil {
				return 0, err
			}
			if err := add(k); err != nil {
				return 0, err
			}
		}
	case *ast.SequenceNode:
		for i, item := range n.Values {
			k, err := w.walk(path+"["+strconv.Itoa(i)+"]", item, depth+1)
			if err != nil {
				return 0, err
			}
			if err := add(k); err != nil {
				return 0, err
			}
		}
	case *ast.TagNode:
		return w.walk(path, n.Value, depth)
	case *ast.MappingKeyNode:
		return w.walk(path, n.Value, depth)
	case *ast.AnchorNode:
		k, err := w.walk(path, n.Value, depth)
		if err != nil {
			return 0, err
		}
		if n.Name != nil && n.Name.GetToken() != nil {
			w.anchors[n.Name.GetToken().Value] = k
			w.d.anchors[n.Name.GetToken().Value] = n.Value
		}
		return k, nil
	case *ast.AliasNode:
		w.aliases++
		if w.aliases > w.lim.MaxAliases {
			return 0, w.d.refuse(n, path, fmt.Sprintf("the document holds more than %d aliases", w.lim.MaxAliases))
		}
		if n.Value != nil && n.Value.GetToken() != nil {
			if k, ok := w.anchors[n.Value.GetToken().Value]; ok {
				size = 0
				if err := add(k); err != nil {
					return 0, err
				}
			}
		}
	}
	return size, nil
}

func (w *walker) mappingValue(path string, mv *ast.MappingValueNode, depth int) (int64, error) {
	if mv == nil {
		return 0, nil
	}
	p := keyText(mv.Key)
	if path != "" {
		p = path + "." + p
	}
	if mv.Key != nil {
		w.d.mark(p, mv.Key)
		if t := mv.Key.GetToken(); t != nil {
			w.d.paths[t] = p // a key names its own path, even where its token also starts the mapping
		}
	}
	k, err := w.walk(p, mv.Value, depth)
	return k + 1, err
}

// keyText is the key as written, without quotes.
func keyText(k ast.MapKeyNode) string {
	if k == nil {
		return ""
	}
	if s, ok := k.(ast.ScalarNode); ok {
		if v := s.GetValue(); v != nil {
			return fmt.Sprint(v)
		}
	}
	return strings.Trim(k.String(), `"'`)
}

// mark records the first position of path and the path of n's token.
func (d *Document) mark(path string, n ast.Node) {
	if n == nil || n.GetToken() == nil {
		return
	}
	t := n.GetToken()
	if _, seen := d.paths[t]; !seen {
		d.paths[t] = path
	}
	if _, seen := d.pos[path]; !seen {
		d.pos[path] = Position{Line: t.Position.Line, Column: t.Position.Column}
	}
}

// refuse returns a refusal of node n at path, placed at n's token.
func (d *Document) refuse(n ast.Node, path, message string) *Error {
	e := &Error{File: d.file, Path: path, Message: message}
	if t := n.GetToken(); t != nil {
		e.Pos = Position{t.Position.Line, t.Position.Column}
	}
	return e
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
		if math.IsInf(v, 0) || math.IsNaN(v) {
			return nil, fmt.Errorf("%v is not a JSON number", v)
		}
		return v, nil
	case string, bool, nil, json.Number:
		return v, nil
	default:
		return fmt.Sprint(v), nil
	}
}
