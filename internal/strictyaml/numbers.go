package strictyaml

import (
	"encoding"
	"reflect"
	"strconv"
	"strings"

	"github.com/goccy/go-yaml"
	"github.com/goccy/go-yaml/ast"
)

// The YAML decoder turns "8080" (a string) into 8080 and 1.5 into 1 where an
// integer is expected, and words a value of the wrong kind in Go's terms
// ("cannot unmarshal []interface {} into Go struct field ... of type
// uint16"); checkNumbers refuses all of these before decoding, by walking the
// target type beside the document, and says what the key must hold in the
// document's terms ("must be an integer, not a list"). Types that decode
// themselves are left to their own decoder.

var selfDecoding = []reflect.Type{
	reflect.TypeFor[yaml.InterfaceUnmarshaler](),
	reflect.TypeFor[yaml.InterfaceUnmarshalerContext](),
	reflect.TypeFor[yaml.BytesUnmarshaler](),
	reflect.TypeFor[yaml.BytesUnmarshalerContext](),
	reflect.TypeFor[yaml.NodeUnmarshaler](),
	reflect.TypeFor[yaml.NodeUnmarshalerContext](),
	reflect.TypeFor[encoding.TextUnmarshaler](),
}

func (d *Document) checkNumbers(v any) error {
	t := reflect.TypeOf(v)
	if t == nil || t.Kind() != reflect.Pointer {
		return nil
	}
	return d.checkNode(t.Elem(), d.root, "", 0)
}

func (d *Document) checkNode(t reflect.Type, n ast.Node, path string, depth int) error {
	if n == nil || depth > DefaultMaxDepth {
		return nil
	}
	for t.Kind() == reflect.Pointer {
		t = t.Elem()
	}
	for _, u := range selfDecoding {
		if reflect.PointerTo(t).Implements(u) {
			return nil
		}
	}
	switch nn := n.(type) {
	case *ast.TagNode:
		return d.checkNode(t, nn.Value, path, depth)
	case *ast.AnchorNode:
		return d.checkNode(t, nn.Value, path, depth)
	case *ast.AliasNode:
		// The aliased value, refused where the alias is written.
		if nn.Value == nil || nn.Value.GetToken() == nil {
			return nil
		}
		v := d.anchors[nn.Value.GetToken().Value]
		if msg := wrongKind(t, v); msg != "" {
			return d.refuse(n, path, msg)
		}
		return d.checkNode(t, v, path, depth+1)
	}
	if msg := wrongKind(t, n); msg != "" {
		return d.refuse(n, path, msg)
	}
	switch t.Kind() {
	case reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64,
		reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64:
		if nn, ok := n.(*ast.IntegerNode); ok {
			if msg := outOfRange(t, nn.Value); msg != "" {
				return d.refuse(n, path, msg)
			}
		}
	case reflect.Struct:
		fields := yamlFields(t)
		for _, mv := range pairs(n) {
			key := keyText(mv.Key)
			if ft, ok := fields[key]; ok {
				if err := d.checkNode(ft, mv.Value, join(path, key), depth+1); err != nil {
					return err
				}
			}
		}
	case reflect.Map:
		for _, mv := range pairs(n) {
			if err := d.checkNode(t.Elem(), mv.Value, join(path, keyText(mv.Key)), depth+1); err != nil {
				return err
			}
		}
	case reflect.Slice, reflect.Array:
		s, ok := n.(*ast.SequenceNode)
		if !ok {
			return nil
		}
		for i, item := range s.Values {
			if err := d.checkNode(t.Elem(), item, path+"["+strconv.Itoa(i)+"]", depth+1); err != nil {
				return err
			}
		}
	}
	return nil
}

// Kinds of written values, in the document's terms.
const (
	aMapping = "a mapping"
	aList    = "a list"
	aString  = "a string"
	anInt    = "an integer"
	aNumber  = "a number"
	aBool    = "true or false"
)

// writtenKind names the kind of value node n holds; empty for a null, an
// alias or a node the decoder reads in its own way.
func writtenKind(n ast.Node) string {
	switch n.(type) {
	case *ast.MappingNode, *ast.MappingValueNode:
		return aMapping
	case *ast.SequenceNode:
		return aList
	case *ast.StringNode, *ast.LiteralNode:
		return aString
	case *ast.IntegerNode:
		return anInt
	case *ast.FloatNode, *ast.InfinityNode, *ast.NanNode:
		return aNumber
	case *ast.BoolNode:
		return aBool
	}
	return ""
}

// expectedKind names what a value decoded into t must be written as ("a
// list of strings"); empty when t takes any value.
func expectedKind(t reflect.Type) string {
	for t.Kind() == reflect.Pointer {
		t = t.Elem()
	}
	switch t.Kind() {
	case reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64,
		reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64:
		return anInt
	case reflect.Float32, reflect.Float64:
		return aNumber
	case reflect.String:
		return aString
	case reflect.Bool:
		return aBool
	case reflect.Struct, reflect.Map:
		return aMapping
	case reflect.Slice, reflect.Array:
		switch e := expectedKind(t.Elem()); e {
		case "":
			return aList
		case aBool:
			return "a list of true or false values"
		case aList:
			return "a list of lists"
		default:
			_, noun, _ := strings.Cut(e, " ") // "a mapping" → "mapping"
			return "a list of " + noun + "s"
		}
	}
	return ""
}

// wrongKind says why node n cannot be decoded into t ("must be a mapping,
// not a list"); empty when its kind fits. A null fits anything; a string
// takes any scalar, as the decoder reads it.
func wrongKind(t reflect.Type, n ast.Node) string {
	want, got := expectedKind(t), writtenKind(n)
	if want == "" || got == "" || strings.HasPrefix(want, got) {
		return ""
	}
	switch {
	case want == aString && got != aMapping && got != aList:
		return ""
	case want == aNumber && got == anInt:
		return ""
	case want == anInt && got == aNumber:
		return "must be an integer" // a fraction, or not finite
	}
	return "must be " + want + ", not " + got
}

// outOfRange says why the integer v does not fit the integer type t (a
// negative value for an unsigned type, for one), in the document's terms;
// empty when it fits or is not an integer the parser read.
func outOfRange(t reflect.Type, v any) string {
	var neg bool
	var mag uint64 // magnitude of v
	switch v := v.(type) {
	case int64:
		neg = v < 0
		mag = uint64(v)
		if neg {
			mag = uint64(-(v + 1)) + 1
		}
	case uint64:
		mag = v
	default:
		return ""
	}
	bits := t.Bits()
	switch t.Kind() {
	case reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64, reflect.Uintptr:
		if neg {
			return "must not be negative"
		}
		if max := uint64(1)<<(bits-1)<<1 - 1; mag > max {
			return "must be at most " + strconv.FormatUint(max, 10)
		}
	default:
		if max := uint64(1)<<(bits-1) - 1; !neg && mag > max {
			return "must be at most " + strconv.FormatUint(max, 10)
		}
		if min := uint64(1) << (bits - 1); neg && mag > min {
			return "must be at least -" + strconv.FormatUint(min, 10)
		}
	}
	return ""
}

// pairs returns the key-value pairs of a mapping node (none for another
// node); a one-pair mapping may be its pair alone.
func pairs(n ast.Node) []*ast.MappingValueNode {
	switch n := n.(type) {
	case *ast.MappingNode:
		return n.Values
	case *ast.MappingValueNode:
		return []*ast.MappingValueNode{n}
	}
	return nil
}

// yamlFields maps the YAML names of t's exported fields to their types,
// the way the decoder names them (yaml tag, else json tag, else the
// lower-cased field name); inline fields are merged in.
func yamlFields(t reflect.Type) map[string]reflect.Type {
	out := map[string]reflect.Type{}
	for i := range t.NumField() {
		f := t.Field(i)
		if !f.IsExported() {
			continue
		}
		tag := f.Tag.Get("yaml")
		if tag == "" {
			tag = f.Tag.Get("json")
		}
		name, opts, _ := strings.Cut(tag, ",")
		if name == "-" {
			continue
		}
		if strings.Contains(","+opts+",", ",inline,") {
			ft := f.Type
			for ft.Kind() == reflect.Pointer {
				ft = ft.Elem()
			}
			if ft.Kind() == reflect.Struct {
				for k, v := range yamlFields(ft) {
					out[k] = v
				}
			}
			continue
		}
		if name == "" {
			name = strings.ToLower(f.Name)
		}
		out[name] = f.Type
	}
	return out
}

func join(path, key string) string {
	if path == "" {
		return key
	}
	return path + "." + key
}
