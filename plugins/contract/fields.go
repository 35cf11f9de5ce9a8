package contract

import (
	"github.com/registrum/registrum/internal/strictjson"

	"encoding/json"
	"unsafe"
)

// Fields is a read-only view of a JSON object's members, read straight from
// the document's bytes: no map and no `any` value is built, so reading a
// field costs no allocation (inside a WebAssembly guest each allocation
// costs about half a microsecond, a new map several).
//
// Like Request, it keeps a member that is absent apart from one that is an
// explicit null. When a name occurs twice, the last occurrence counts, as
// in a parsed map.
//
// A view shares the memory of the document it was read from: it, and the
// strings and bytes it returns, are valid only while that document is
// unchanged. A guest's input buffer is reused by the host on the next call,
// so a handler must copy (strings.Clone, bytes.Clone) whatever it keeps
// beyond its return. The zero Fields is an empty object.
type Fields struct {
	b []byte              // the document holding the object
	m []strictjson.Member // the object's members, in document order
}

// FieldsReader reads Fields, reusing the storage of its last result.
// Its zero value is ready to use; it is not safe for concurrent use.
type FieldsReader struct {
	m []strictjson.Member
}

// ReadObjectMember reads a JSON document that must be an object holding
// exactly one member, name, whose value is an object, and returns a view of
// that inner object. It accepts and refuses exactly the documents
// ParseObjectMember does (same grammar, nesting bound, duplicate members:
// the last wins, and the same checked-input rules for strings), but builds
// nothing but an index of the inner object's members. The index is reused by
// the next call, which invalidates the view returned by this one.
func (r *FieldsReader) ReadObjectMember(b []byte, name string) (Fields, error) {
	p := strictjson.NewParser(b, true)
	err := p.OnlyMember(name, func() (bool, error) {
		if p.Peek() != '{' {
			return false, p.Skip(1)
		}
		m, err := p.ScanObject(2, r.m[:0], true)
		r.m = m
		return true, err
	})
	if err != nil {
		return Fields{}, err
	}
	return Fields{b: b, m: r.m}, nil
}

// CheckObjectMember reports whether b is a document ParseObjectMember would
// accept, with every string checked as ParseValue checks it (control
// characters, UTF-8, escapes), without building anything. The host uses it
// on inputs it passes on as bytes.
func CheckObjectMember(b []byte, name string) error {
	p := strictjson.NewParser(b, false)
	return p.OnlyMember(name, func() (bool, error) {
		if p.Peek() == '{' {
			_, err := p.ScanObject(2, nil, false)
			return true, err
		}
		return false, p.Skip(1)
	})
}

// find returns the index of member name (its last occurrence), or -1.
func (f Fields) find(name string) int {
	for i := len(f.m) - 1; i >= 0; i-- {
		if f.m[i].Key == name {
			return i
		}
	}
	return -1
}

// lookup returns the bytes of member name's value (its last occurrence).
func (f Fields) lookup(name string) ([]byte, bool) {
	if i := f.find(name); i >= 0 {
		return f.b[f.m[i].Start:f.m[i].End], true
	}
	return nil, false
}

// Has reports whether member name is present (null included).
func (f Fields) Has(name string) bool {
	_, ok := f.lookup(name)
	return ok
}

// IsNull reports whether member name is present as an explicit null.
func (f Fields) IsNull(name string) bool {
	v, _ := f.lookup(name)
	return string(v) == "null"
}

// String returns member name when it is a string. A string without escapes
// shares the document's memory (see Fields); one with escapes is decoded
// into new memory.
func (f Fields) String(name string) (string, bool) {
	i := f.find(name)
	if i < 0 {
		return "", false
	}
	if m := f.m[i]; m.Plain {
		if m.End-m.Start == 2 {
			return "", true
		}
		return unsafe.String(&f.b[m.Start+1], m.End-m.Start-2), true
	}
	v := f.b[f.m[i].Start:f.m[i].End]
	if v[0] != '"' {
		return "", false
	}
	p := strictjson.NewParser(v, true)
	s, err := p.ReadString()
	return s, err == nil
}

// Bool returns member name when it is true or false.
func (f Fields) Bool(name string) (value, ok bool) {
	v, _ := f.lookup(name)
	switch string(v) {
	case "true":
		return true, true
	case "false":
		return false, true
	}
	return false, false
}

// Number returns member name when it is a number, exactly as written.
func (f Fields) Number(name string) (json.Number, bool) {
	v, _ := f.lookup(name)
	if len(v) == 0 || v[0] != '-' && (v[0] < '0' || v[0] > '9') {
		return "", false
	}
	return json.Number(v), true
}

// Object returns member name when it is an object, as a view of its own.
// The view's index is new memory; its values share the document's.
func (f Fields) Object(name string) (Fields, bool) {
	v, _ := f.lookup(name)
	if len(v) == 0 || v[0] != '{' {
		return Fields{}, false
	}
	p := strictjson.NewParser(v, true)
	// The document was checked when the outer view was read, so this
	// cannot fail; the depth only matters for that check.
	m, err := p.ScanObject(0, nil, true)
	if err != nil {
		return Fields{}, false
	}
	return Fields{b: v, m: m}, true
}

// Raw returns the JSON text of member name's value exactly as the document
// holds it (for example `1.50` or `"\u00e9"`), or nil when it is absent.
// PlanWriter.SetRaw writes such a value the way Value would write its parsed
// form.
func (f Fields) Raw(name string) []byte {
	v, _ := f.lookup(name)
	return v
}

// Len returns the number of members, a repeated name counted each time.
func (f Fields) Len() int { return len(f.m) }

// AppendRawValue appends the JSON value raw exactly as AppendValue appends
// the value ParseCheckedValue reads from it: strings re-encoded, numbers and
// literals as written, arrays and objects without space and with members
// sorted (the last of a repeated name kept). Scalars cost no allocation.
func AppendRawValue(buf, raw []byte) ([]byte, error) {
	p := strictjson.NewParser(raw, true)
	p.Space()
	var err error
	switch c := p.Peek(); {
	case c == '"':
		var s string
		if s, err = p.ReadString(); err == nil {
			buf = AppendString(buf, s)
		}
	case c == '{' || c == '[':
		var v any
		if v, err = ParseCheckedValue(raw); err == nil {
			return AppendValue(buf, v)
		}
		return nil, err
	default:
		var lit []byte
		if lit, err = p.SkipValue(0); err == nil {
			buf = append(buf, lit...)
		}
	}
	if err != nil {
		return nil, err
	}
	if err := p.End(); err != nil {
		return nil, err
	}
	return buf, nil
}
