package contract

import (
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
	b []byte   // the document holding the object
	m []member // the object's members, in document order
}

// member is one member of a Fields: its decoded name and its value's span
// in the document.
type member struct {
	key        string
	start, end int
	// plain: the value is a string without escapes, so its text is the
	// span without its quotes.
	plain bool
}

// FieldsReader reads Fields, reusing the storage of its last result.
// Its zero value is ready to use; it is not safe for concurrent use.
type FieldsReader struct {
	m []member
}

// ReadObjectMember reads a JSON document that must be an object holding
// exactly one member, name, whose value is an object, and returns a view of
// that inner object. It accepts and refuses exactly the documents
// ParseObjectMember does (same grammar, nesting bound, duplicate members:
// the last wins, and the same checked-input rules for strings), but builds
// nothing but an index of the inner object's members. The index is reused by
// the next call, which invalidates the view returned by this one.
func (r *FieldsReader) ReadObjectMember(b []byte, name string) (Fields, error) {
	p := parser{b: b, checked: true}
	err := p.onlyMember(name, func() (bool, error) {
		if p.i >= len(p.b) || p.b[p.i] != '{' {
			return false, p.skip(1)
		}
		m, err := p.object2(2, r.m[:0], true)
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
	p := parser{b: b}
	return p.onlyMember(name, func() (bool, error) {
		if p.i < len(p.b) && p.b[p.i] == '{' {
			_, err := p.object2(2, nil, false)
			return true, err
		}
		return false, p.skip(1)
	})
}

// key reads an object member's name, the ':' after it and the space around
// them.
func (p *parser) key() (string, error) {
	p.space()
	if p.i >= len(p.b) || p.b[p.i] != '"' {
		return "", p.fail("expected object key")
	}
	k, err := p.str()
	if err != nil {
		return "", err
	}
	p.space()
	if p.i >= len(p.b) || p.b[p.i] != ':' {
		return "", p.fail("expected ':'")
	}
	p.i++
	p.space()
	return k, nil
}

// skip reads one value as value does, without building it.
func (p *parser) skip(depth int) error {
	if p.i >= len(p.b) {
		return p.fail("unexpected end")
	}
	switch c := p.b[p.i]; {
	case c == '{':
		_, err := p.object2(depth+1, nil, false)
		return err
	case c == '[':
		return p.skipArray(depth + 1)
	case c == '"':
		_, err := p.str()
		return err
	case c == 't':
		return p.literal("true")
	case c == 'f':
		return p.literal("false")
	case c == 'n':
		return p.literal("null")
	case c == '-' || c >= '0' && c <= '9':
		return p.scanNumber()
	default:
		return p.fail("unexpected character")
	}
}

// object2 reads an object as object does without building it; when index is
// set it appends each member's name and value span to m. Inside a
// WebAssembly guest a function call costs tens of nanoseconds, so the
// common cases (names and string values without escapes) are read here
// without calling the general string reader.
func (p *parser) object2(depth int, m []member, index bool) ([]member, error) {
	if depth > MaxDepth {
		return nil, p.fail("nesting too deep")
	}
	b := p.b
	i := spaceEnd(b, p.i+1) // past {
	if i < len(b) && b[i] == '}' {
		p.i = i + 1
		return m, nil
	}
	for {
		if i >= len(b) || b[i] != '"' {
			p.i = i
			return nil, p.fail("expected object key")
		}
		var k string
		// The fast paths below take a string up to its closing quote
		// without checking its bytes: only for checked input.
		j := -1
		if p.checked {
			j = stringEnd(b, i+1)
		}
		if j >= 0 && b[j] == '"' {
			k = unsafe.String(unsafe.SliceData(b[i+1:j]), j-i-1)
			i = j + 1
		} else {
			p.i = i
			var err error
			if k, err = p.str(); err != nil {
				return nil, err
			}
			i = p.i
		}
		i = spaceEnd(b, i)
		if i >= len(b) || b[i] != ':' {
			p.i = i
			return nil, p.fail("expected ':'")
		}
		i = spaceEnd(b, i+1)
		start, plain := i, false
		if i < len(b) && b[i] == '"' {
			j := -1
			if p.checked {
				j = stringEnd(b, i+1)
			}
			if j >= 0 && b[j] == '"' {
				i, plain = j+1, true
			} else {
				p.i = i
				if _, err := p.str(); err != nil {
					return nil, err
				}
				i = p.i
			}
		} else {
			p.i = i
			if err := p.skip(depth); err != nil {
				return nil, err
			}
			i = p.i
		}
		if index {
			m = append(m, member{key: k, start: start, end: i, plain: plain})
		}
		i = spaceEnd(b, i)
		if i >= len(b) {
			p.i = i
			return nil, p.fail("unexpected end")
		}
		switch b[i] {
		case ',':
			i = spaceEnd(b, i+1)
		case '}':
			p.i = i + 1
			return m, nil
		default:
			p.i = i
			return nil, p.fail("expected ',' or '}'")
		}
	}
}

// spaceEnd returns the index of the first byte of b at or after i that is
// not JSON white space.
func spaceEnd(b []byte, i int) int {
	for i < len(b) && (b[i] == ' ' || b[i] == '\t' || b[i] == '\n' || b[i] == '\r') {
		i++
	}
	return i
}

// skipArray reads an array as array does without building it.
func (p *parser) skipArray(depth int) error {
	if depth > MaxDepth {
		return p.fail("nesting too deep")
	}
	p.i++ // [
	p.space()
	if p.i < len(p.b) && p.b[p.i] == ']' {
		p.i++
		return nil
	}
	for {
		p.space()
		if err := p.skip(depth); err != nil {
			return err
		}
		p.space()
		if p.i >= len(p.b) {
			return p.fail("unexpected end")
		}
		switch p.b[p.i] {
		case ',':
			p.i++
		case ']':
			p.i++
			return nil
		default:
			return p.fail("expected ',' or ']'")
		}
	}
}

// find returns the index of member name (its last occurrence), or -1.
func (f Fields) find(name string) int {
	for i := len(f.m) - 1; i >= 0; i-- {
		if f.m[i].key == name {
			return i
		}
	}
	return -1
}

// lookup returns the bytes of member name's value (its last occurrence).
func (f Fields) lookup(name string) ([]byte, bool) {
	if i := f.find(name); i >= 0 {
		return f.b[f.m[i].start:f.m[i].end], true
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
	if m := f.m[i]; m.plain {
		if m.end-m.start == 2 {
			return "", true
		}
		return unsafe.String(&f.b[m.start+1], m.end-m.start-2), true
	}
	v := f.b[f.m[i].start:f.m[i].end]
	if v[0] != '"' {
		return "", false
	}
	p := parser{b: v, checked: true}
	s, err := p.str()
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
	p := parser{b: v, checked: true}
	// The document was checked when the outer view was read, so this
	// cannot fail; the depth only matters for that check.
	m, err := p.object2(0, nil, true)
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
	p := parser{b: raw, checked: true}
	p.space()
	if p.i >= len(p.b) {
		return nil, p.fail("unexpected end")
	}
	start := p.i
	var err error
	switch c := p.b[p.i]; {
	case c == '"':
		var s string
		if s, err = p.str(); err == nil {
			buf = AppendString(buf, s)
		}
	case c == 't', c == 'f', c == 'n', c == '-' || c >= '0' && c <= '9':
		if err = p.skip(0); err == nil {
			buf = append(buf, p.b[start:p.i]...)
		}
	default:
		var v any
		if v, err = ParseCheckedValue(raw); err == nil {
			return AppendValue(buf, v)
		}
		return nil, err
	}
	if err != nil {
		return nil, err
	}
	p.space()
	if p.i != len(p.b) {
		return nil, p.fail("trailing data")
	}
	return buf, nil
}
