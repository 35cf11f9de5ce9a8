// Package strictjson is Registrum's one JSON reader: a fast, reflection-free
// parser that decodes untrusted JSON strictly. Duplicate object members,
// trailing data, invalid UTF-8 and nesting deeper than MaxDepth are refused,
// and numbers are kept exactly as json.Number.
//
// Decode reads a whole document into plain Go values; Parser is the same
// reader for callers that read a document of known shape without building
// it (the plugin contract's output decoders and field views). It depends on
// nothing but the standard library and builds for GOOS=wasip1 GOARCH=wasm,
// where plugin guests use it.
package strictjson

import (
	"encoding/json"
	"errors"
	"fmt"
	"math/bits"
	"strconv"
	"strings"
	"unicode"
	"unicode/utf16"
	"unicode/utf8"
	"unsafe"
)

// MaxDepth bounds the nesting of arrays and objects.
const MaxDepth = 64

// SyntaxError is a refusal of the document, with the JSON Pointer of the
// member at fault ("" for the document as a whole).
type SyntaxError struct {
	Pointer string
	Msg     string
}

func (e *SyntaxError) Error() string {
	if e.Pointer == "" {
		return "strictjson: " + e.Msg
	}
	return fmt.Sprintf("strictjson: at %s: %s", e.Pointer, e.Msg)
}

// Decode parses one JSON value. Objects become map[string]any, arrays []any,
// numbers json.Number, and strings, booleans and null their Go forms. Every
// refusal is a *SyntaxError.
func Decode(data []byte) (any, error) {
	return parse(Parser{b: data})
}

// DecodeChecked is Decode for a document already accepted by Decode (or by
// a Parser that is not checked): inside a WebAssembly guest it skips the
// per-byte validation of strings (control characters, UTF-8) and the
// duplicate-member check, and strings without escapes share data's memory
// instead of being copied, so data must never change afterwards. On other
// input it may accept what Decode refuses; it never reads out of bounds.
func DecodeChecked(data []byte) (any, error) {
	return parse(Parser{b: data, checked: true})
}

// Parser reads one JSON document at a time, moving through it as its
// methods read values. A checked parser trusts that its input was accepted
// before by an unchecked one (see DecodeChecked). The zero Parser reads an
// empty document.
type Parser struct {
	b       []byte
	i       int
	checked bool
	plain   bool // the last string ReadString read had no escapes and shares b (checked input)
}

// NewParser returns a parser at the start of b; see Parser for checked.
func NewParser(b []byte, checked bool) Parser {
	return Parser{b: b, checked: checked}
}

// Member is one member of an object ScanObject indexed: its decoded name
// and the span of its value in the document. Plain reports that the value
// is a string without escapes, so its text is the span without its quotes.
type Member struct {
	Key        string
	Start, End int
	Plain      bool
}

// Peek returns the byte at the parser's position, or 0 at the end.
func (p *Parser) Peek() byte {
	if p.i >= len(p.b) {
		return 0
	}
	return p.b[p.i]
}

// SkipValue reads one value as Skip does and returns its text.
func (p *Parser) SkipValue(depth int) ([]byte, error) {
	start := p.i
	if err := p.Skip(depth); err != nil {
		return nil, err
	}
	return p.b[start:p.i], nil
}

// End reads trailing white space and fails unless the document ends there.
func (p *Parser) End() error {
	p.Space()
	if p.i != len(p.b) {
		return p.refuse("unexpected data after the JSON value")
	}
	return nil
}

// refuse returns a SyntaxError for the document at the parser's position.
func (p *Parser) refuse(msg string) error {
	return &SyntaxError{Msg: msg + " at byte " + strconv.Itoa(p.i)}
}

// tooDeep is the refusal of nesting deeper than MaxDepth.
func (p *Parser) tooDeep() error {
	return p.refuse(fmt.Sprintf("nesting too deep (deeper than %d levels)", MaxDepth))
}

// at prefixes the JSON Pointer of a SyntaxError with one reference token.
func at(err error, token string) error {
	var se *SyntaxError
	if errors.As(err, &se) {
		se.Pointer = "/" + escape(token) + se.Pointer
	}
	return err
}

// escape escapes a member name for a JSON Pointer (RFC 6901).
func escape(s string) string {
	return strings.ReplaceAll(strings.ReplaceAll(s, "~", "~0"), "/", "~1")
}

// Pointer joins member names into a JSON Pointer.
func Pointer(parts ...string) string {
	var b strings.Builder
	for _, p := range parts {
		b.WriteByte('/')
		b.WriteString(escape(p))
	}
	return b.String()
}

// parse reads one whole document with p.
func parse(p Parser) (any, error) {
	p.Space()
	v, err := p.Value(0)
	if err != nil {
		return nil, err
	}
	if err := p.End(); err != nil {
		return nil, err
	}
	return v, nil
}

// Fail returns a SyntaxError for malformed JSON at the parser's position.
func (p *Parser) Fail(what string) error {
	return p.refuse("malformed JSON: " + what)
}

// Space reads white space.
func (p *Parser) Space() {
	for p.i < len(p.b) {
		switch p.b[p.i] {
		case ' ', '\t', '\n', '\r':
			p.i++
		default:
			return
		}
	}
}

// Value reads one value at nesting depth (the document itself is at 0) into
// the Go forms Decode gives.
func (p *Parser) Value(depth int) (any, error) {
	if p.i >= len(p.b) {
		return nil, p.Fail("unexpected end of JSON input")
	}
	switch c := p.b[p.i]; {
	case c == '{':
		return p.object(depth + 1)
	case c == '[':
		return p.array(depth + 1)
	case c == '"':
		return p.ReadString()
	case c == 't':
		return true, p.literal("true")
	case c == 'f':
		return false, p.literal("false")
	case c == 'n':
		return nil, p.literal("null")
	case c == '-' || c >= '0' && c <= '9':
		return p.number()
	default:
		return nil, p.Fail("unexpected character")
	}
}

func (p *Parser) literal(word string) error {
	if len(p.b)-p.i < len(word) || string(p.b[p.i:p.i+len(word)]) != word {
		return p.Fail("invalid literal")
	}
	p.i += len(word)
	return nil
}

func (p *Parser) object(depth int) (any, error) {
	if depth > MaxDepth {
		return nil, p.tooDeep()
	}
	p.i++ // {
	m := map[string]any{}
	p.Space()
	if p.i < len(p.b) && p.b[p.i] == '}' {
		p.i++
		return m, nil
	}
	for {
		k, v, err := p.member(depth)
		if err != nil {
			return nil, err
		}
		n := len(m)
		m[k] = v
		if len(m) == n && !p.checked {
			return nil, p.duplicate(k)
		}
		p.Space()
		if p.i >= len(p.b) {
			return nil, p.Fail("unexpected end of JSON input")
		}
		switch p.b[p.i] {
		case ',':
			p.i++
		case '}':
			p.i++
			return m, nil
		default:
			return nil, p.Fail("expected ',' or '}'")
		}
	}
}

// member reads one object member, `"key": value`, and the space before it.
func (p *Parser) member(depth int) (string, any, error) {
	p.Space()
	if p.i >= len(p.b) || p.b[p.i] != '"' {
		return "", nil, p.Fail("expected object key")
	}
	k, err := p.ReadString()
	if err != nil {
		return "", nil, err
	}
	p.Space()
	if p.i >= len(p.b) || p.b[p.i] != ':' {
		return "", nil, p.Fail("expected ':'")
	}
	p.i++
	p.Space()
	v, err := p.Value(depth)
	if err != nil {
		return "", nil, at(err, k)
	}
	return k, v, nil
}

func (p *Parser) array(depth int) (any, error) {
	if depth > MaxDepth {
		return nil, p.tooDeep()
	}
	p.i++ // [
	a := []any{}
	p.Space()
	if p.i < len(p.b) && p.b[p.i] == ']' {
		p.i++
		return a, nil
	}
	for {
		p.Space()
		v, err := p.Value(depth)
		if err != nil {
			return nil, at(err, strconv.Itoa(len(a)))
		}
		a = append(a, v)
		p.Space()
		if p.i >= len(p.b) {
			return nil, p.Fail("unexpected end of JSON input")
		}
		switch p.b[p.i] {
		case ',':
			p.i++
		case ']':
			p.i++
			return a, nil
		default:
			return nil, p.Fail("expected ',' or ']'")
		}
	}
}

func (p *Parser) number() (any, error) {
	start := p.i
	if err := p.scanNumber(); err != nil {
		return nil, err
	}
	return json.Number(p.b[start:p.i]), nil
}

// IsNumber reports whether s is exactly one JSON number, as a document's
// numbers are read (no sign but '-', no leading zero, no hexadecimal).
func IsNumber(s string) bool {
	if s == "" {
		return false
	}
	p := Parser{b: unsafe.Slice(unsafe.StringData(s), len(s))} // read only
	return p.scanNumber() == nil && p.i == len(p.b)
}

// scanNumber reads one JSON number without converting it.
func (p *Parser) scanNumber() error {
	if p.b[p.i] == '-' {
		p.i++
	}
	digits := func() int {
		n := 0
		for p.i < len(p.b) && p.b[p.i] >= '0' && p.b[p.i] <= '9' {
			p.i++
			n++
		}
		return n
	}
	intStart := p.i
	if n := digits(); n == 0 || n > 1 && p.b[intStart] == '0' {
		return p.Fail("invalid number")
	}
	if p.i < len(p.b) && p.b[p.i] == '.' {
		p.i++
		if digits() == 0 {
			return p.Fail("invalid number")
		}
	}
	if p.i < len(p.b) && (p.b[p.i] == 'e' || p.b[p.i] == 'E') {
		p.i++
		if p.i < len(p.b) && (p.b[p.i] == '+' || p.b[p.i] == '-') {
			p.i++
		}
		if digits() == 0 {
			return p.Fail("invalid number")
		}
	}
	return nil
}

// ReadString reads a string, which must start at the parser's position.
func (p *Parser) ReadString() (string, error) {
	p.i++ // opening quote
	start := p.i
	p.plain = false
	if p.checked {
		// Fast path for checked input: find the closing quote (eight bytes
		// per step past the first few) and share the bytes.
		if end := stringEnd(p.b, start) - start; end >= 0 && p.b[start+end] == '"' {
			p.i = start + end + 1
			p.plain = true
			if end == 0 {
				return "", nil
			}
			return unsafe.String(&p.b[start], end), nil
		}
	}
	// Fast path: no escapes.
	for p.i < len(p.b) {
		// Eight bytes at a time past those that need no look.
		for p.i+8 <= len(p.b) && specialBits(word(p.b, p.i)) == 0 {
			p.i += 8
		}
		if p.i >= len(p.b) {
			break
		}
		c := p.b[p.i]
		if c == '"' {
			s := p.b[start:p.i]
			p.i++
			if !utf8.Valid(s) {
				return "", p.Fail("invalid UTF-8 in string")
			}
			return string(s), nil
		}
		if c == '\\' {
			break
		}
		if c < 0x20 {
			return "", p.Fail("control character in string")
		}
		p.i++
	}
	out := append([]byte(nil), p.b[start:p.i]...)
	for p.i < len(p.b) {
		c := p.b[p.i]
		switch {
		case c == '"':
			p.i++
			if !utf8.Valid(out) {
				return "", p.Fail("invalid UTF-8 in string")
			}
			return string(out), nil
		case c < 0x20:
			return "", p.Fail("control character in string")
		case c != '\\':
			out = append(out, c)
			p.i++
			continue
		}
		p.i++
		if p.i >= len(p.b) {
			break
		}
		esc := p.b[p.i]
		p.i++
		switch esc {
		case '"', '\\', '/':
			out = append(out, esc)
		case 'b':
			out = append(out, '\b')
		case 'f':
			out = append(out, '\f')
		case 'n':
			out = append(out, '\n')
		case 'r':
			out = append(out, '\r')
		case 't':
			out = append(out, '\t')
		case 'u':
			r, ok := p.hex4()
			if !ok {
				return "", p.Fail("invalid \\u escape")
			}
			if utf16.IsSurrogate(r) {
				r2 := rune(-1)
				if p.i+1 < len(p.b) && p.b[p.i] == '\\' && p.b[p.i+1] == 'u' {
					p.i += 2
					if r2, ok = p.hex4(); !ok {
						return "", p.Fail("invalid \\u escape")
					}
				}
				// A surrogate escape must be the first half of a pair
				// followed by its second half; anything else names no
				// character, and is refused rather than replaced by U+FFFD.
				if r = utf16.DecodeRune(r, r2); r == unicode.ReplacementChar {
					return "", p.Fail("an unpaired UTF-16 surrogate escape in string names no Unicode character")
				}
			}
			out = utf8.AppendRune(out, r)
		default:
			return "", p.Fail("invalid escape")
		}
	}
	return "", p.Fail("unterminated string")
}

func (p *Parser) hex4() (rune, bool) {
	if len(p.b)-p.i < 4 {
		return 0, false
	}
	var r rune
	for _, c := range p.b[p.i : p.i+4] {
		r <<= 4
		switch {
		case c >= '0' && c <= '9':
			r |= rune(c - '0')
		case c >= 'a' && c <= 'f':
			r |= rune(c - 'a' + 10)
		case c >= 'A' && c <= 'F':
			r |= rune(c - 'A' + 10)
		default:
			return 0, false
		}
	}
	p.i += 4
	return r, true
}

// Word-at-a-time helpers. Inside a WebAssembly guest every loop iteration
// and every branch is costly, so these scans test 8 or 32 bytes per
// iteration with branch-free bit tricks, then find the byte within the word
// from its bits (word reads bytes little-endian on every platform, so the
// lowest flagged bit is the first flagged byte).
const (
	lsb   = 0x0101010101010101
	msb   = 0x8080808080808080
	quote = lsb * '"'
	bslsh = lsb * '\\'
)

// quoteOrBackslashBits returns a word with the high bit set in the lowest
// byte of w that is '"' or '\\' (bytes above it may be flagged too), or 0.
func quoteOrBackslashBits(w uint64) uint64 {
	x, y := w^quote, w^bslsh
	return ((x-lsb)&^x | (y-lsb)&^y) & msb
}

// specialBits is quoteOrBackslashBits for the bytes a JSON string must
// escape or check: < 0x20, >= 0x80, '"' or '\\'.
func specialBits(w uint64) uint64 {
	return ((w-lsb*0x20)&^w|w)&msb | quoteOrBackslashBits(w)
}

// quoteOrBackslash returns the index of the first '"' or '\\' in b, or -1.
func quoteOrBackslash(b []byte) int {
	i := 0
	for ; i+32 <= len(b); i += 32 {
		if quoteOrBackslashBits(word(b, i))|quoteOrBackslashBits(word(b, i+8))|
			quoteOrBackslashBits(word(b, i+16))|quoteOrBackslashBits(word(b, i+24)) != 0 {
			break
		}
	}
	for ; i+8 <= len(b); i += 8 {
		if t := quoteOrBackslashBits(word(b, i)); t != 0 {
			return i + bits.TrailingZeros64(t)>>3
		}
	}
	for ; i < len(b); i++ {
		if b[i] == '"' || b[i] == '\\' {
			return i
		}
	}
	return -1
}

// stringEnd returns the index of the first '"' or '\\' in b at or after i,
// or -1. Most strings are short: the first two words are tested before the
// unrolled scan.
func stringEnd(b []byte, i int) int {
	for n := i + 16; i+8 <= len(b) && i < n; i += 8 {
		if t := quoteOrBackslashBits(word(b, i)); t != 0 {
			return i + bits.TrailingZeros64(t)>>3
		}
	}
	if j := quoteOrBackslash(b[i:]); j >= 0 {
		return i + j
	}
	return -1
}

// key reads an object member's name, the ':' after it and the space around
// them.
func (p *Parser) Key() (string, error) {
	p.Space()
	if p.i >= len(p.b) || p.b[p.i] != '"' {
		return "", p.Fail("expected object key")
	}
	k, err := p.ReadString()
	if err != nil {
		return "", err
	}
	p.Space()
	if p.i >= len(p.b) || p.b[p.i] != ':' {
		return "", p.Fail("expected ':'")
	}
	p.i++
	p.Space()
	return k, nil
}

// skip reads one value as value does, without building it.
func (p *Parser) Skip(depth int) error {
	if p.i >= len(p.b) {
		return p.Fail("unexpected end of JSON input")
	}
	switch c := p.b[p.i]; {
	case c == '{':
		_, err := p.ScanObject(depth+1, nil, false)
		return err
	case c == '[':
		return p.skipArray(depth + 1)
	case c == '"':
		_, err := p.ReadString()
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
		return p.Fail("unexpected character")
	}
}

// object2 reads an object as object does without building it; when index is
// set it appends each member's name and value span to m. Inside a
// WebAssembly guest a function call costs tens of nanoseconds, so the
// common cases (names and string values without escapes) are read here
// without calling the general string reader.
func (p *Parser) ScanObject(depth int, m []Member, index bool) ([]Member, error) {
	if depth > MaxDepth {
		return nil, p.tooDeep()
	}
	b := p.b
	i := spaceEnd(b, p.i+1) // past {
	if i < len(b) && b[i] == '}' {
		p.i = i + 1
		return m, nil
	}
	var seen names // unchecked input only
	for {
		if i >= len(b) || b[i] != '"' {
			p.i = i
			return nil, p.Fail("expected object key")
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
			if k, err = p.ReadString(); err != nil {
				return nil, err
			}
			i = p.i
			if !p.checked && !seen.add(k) {
				return nil, p.duplicate(k)
			}
		}
		i = spaceEnd(b, i)
		if i >= len(b) || b[i] != ':' {
			p.i = i
			return nil, p.Fail("expected ':'")
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
				if _, err := p.ReadString(); err != nil {
					return nil, err
				}
				i = p.i
			}
		} else {
			p.i = i
			if err := p.Skip(depth); err != nil {
				return nil, err
			}
			i = p.i
		}
		if index {
			m = append(m, Member{Key: k, Start: start, End: i, Plain: plain})
		}
		i = spaceEnd(b, i)
		if i >= len(b) {
			p.i = i
			return nil, p.Fail("unexpected end of JSON input")
		}
		switch b[i] {
		case ',':
			i = spaceEnd(b, i+1)
		case '}':
			p.i = i + 1
			return m, nil
		default:
			p.i = i
			return nil, p.Fail("expected ',' or '}'")
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
func (p *Parser) skipArray(depth int) error {
	if depth > MaxDepth {
		return p.tooDeep()
	}
	p.i++ // [
	p.Space()
	if p.i < len(p.b) && p.b[p.i] == ']' {
		p.i++
		return nil
	}
	for {
		p.Space()
		if err := p.Skip(depth); err != nil {
			return err
		}
		p.Space()
		if p.i >= len(p.b) {
			return p.Fail("unexpected end of JSON input")
		}
		switch p.b[p.i] {
		case ',':
			p.i++
		case ']':
			p.i++
			return nil
		default:
			return p.Fail("expected ',' or ']'")
		}
	}
}

// expectObject fails unless an object starts at p.
func (p *Parser) ExpectObject() error {
	if p.i >= len(p.b) || p.b[p.i] != '{' {
		return errors.New("not an object")
	}
	return nil
}

// null reads a null at p, if there is one.
func (p *Parser) Null() bool {
	if len(p.b)-p.i >= 4 && string(p.b[p.i:p.i+4]) == "null" {
		p.i += 4
		return true
	}
	return false
}

// text reads a string, or a null as "".
func (p *Parser) Text() (string, error) {
	if p.Null() {
		return "", nil
	}
	if p.i >= len(p.b) || p.b[p.i] != '"' {
		return "", errors.New("not a string")
	}
	return p.ReadString()
}

// members reads the object starting at p, calling fn with p at each
// member's value and the depth of values inside it. Names not in allowed
// (when allowed is not nil) and repeated names are refused.
func (p *Parser) Members(depth int, allowed []string, fn func(key string, depth int) error) error {
	if depth > MaxDepth {
		return p.tooDeep()
	}
	p.i++ // {
	p.Space()
	if p.i < len(p.b) && p.b[p.i] == '}' {
		p.i++
		return nil
	}
	var seen uint64
	for {
		k, err := p.Key()
		if err != nil {
			return err
		}
		if allowed != nil {
			n := -1
			for j, a := range allowed {
				if a == k {
					n = j
				}
			}
			if n < 0 {
				return fmt.Errorf("unknown member %q", k)
			}
			if seen&(1<<n) != 0 {
				return fmt.Errorf("repeated member %q", k)
			}
			seen |= 1 << n
		}
		if err := fn(k, depth+1); err != nil {
			return err
		}
		p.Space()
		if p.i >= len(p.b) {
			return p.Fail("unexpected end of JSON input")
		}
		switch p.b[p.i] {
		case ',':
			p.i++
		case '}':
			p.i++
			return nil
		default:
			return p.Fail("expected ',' or '}'")
		}
	}
}

// elements reads the array starting at p, calling fn with p at each
// element and the depth of values inside it.
func (p *Parser) Elements(depth int, fn func(depth int) error) error {
	if depth > MaxDepth {
		return p.tooDeep()
	}
	if p.i >= len(p.b) || p.b[p.i] != '[' {
		return errors.New("not an array")
	}
	p.i++
	p.Space()
	if p.i < len(p.b) && p.b[p.i] == ']' {
		p.i++
		return nil
	}
	for {
		p.Space()
		if err := fn(depth + 1); err != nil {
			return err
		}
		p.Space()
		if p.i >= len(p.b) {
			return p.Fail("unexpected end of JSON input")
		}
		switch p.b[p.i] {
		case ',':
			p.i++
		case ']':
			p.i++
			return nil
		default:
			return p.Fail("expected ',' or ']'")
		}
	}
}

// document reads one top-level object with fn and refuses anything after it.
func (p *Parser) Document(fn func(p *Parser) error) error {
	p.Space()
	if err := p.ExpectObject(); err != nil {
		return err
	}
	if err := fn(p); err != nil {
		return err
	}
	p.Space()
	if p.i != len(p.b) {
		return p.refuse("unexpected data after the JSON value")
	}
	return nil
}

// onlyMember reads a document that must be an object holding only the
// member name (repeated or not). For each occurrence it calls value with p
// at the member's value, which value reads, reporting whether it is an
// object; the last occurrence must be one.
func (p *Parser) OnlyMember(name string, value func() (bool, error)) error {
	p.Space()
	if p.i >= len(p.b) || p.b[p.i] != '{' {
		return errors.New("input: not a JSON object")
	}
	p.i++
	found, seenName := false, false
	for first := true; ; first = false {
		p.Space()
		if first && p.i < len(p.b) && p.b[p.i] == '}' {
			p.i++
			break
		}
		k, err := p.Key()
		if err != nil {
			return err
		}
		// A repeated member: refused, unless the input is checked (then the
		// last one wins, as in a parsed map).
		if k == name && seenName && !p.checked {
			return p.duplicate(k)
		}
		seenName = seenName || k == name
		if found, err = value(); err != nil {
			return err
		}
		if k != name {
			return fmt.Errorf("input: only the member %q is allowed", name)
		}
		p.Space()
		if p.i >= len(p.b) {
			return p.Fail("unexpected end of JSON input")
		}
		c := p.b[p.i]
		p.i++
		if c == '}' {
			break
		}
		if c != ',' {
			p.i--
			return p.Fail("expected ',' or '}'")
		}
	}
	p.Space()
	if p.i != len(p.b) {
		return p.refuse("unexpected data after the JSON value")
	}
	if !found {
		return fmt.Errorf("input.%s: missing or not an object", name)
	}
	return nil
}

// duplicate is the refusal of a repeated member name.
func (p *Parser) duplicate(k string) error {
	return &SyntaxError{Pointer: "/" + escape(k), Msg: "duplicate member " + strconv.Quote(k) + " at byte " + strconv.Itoa(p.i)}
}

// names is the set of member names an object has had so far: a few in a
// small array (no allocation for the usual object), the rest in a map.
type names struct {
	small [8]string
	n     int
	big   map[string]struct{}
}

// add adds k and reports whether it was new.
func (s *names) add(k string) bool {
	for _, x := range s.small[:s.n] {
		if x == k {
			return false
		}
	}
	if s.big != nil {
		if _, dup := s.big[k]; dup {
			return false
		}
	}
	if s.n < len(s.small) {
		s.small[s.n] = k
		s.n++
		return true
	}
	if s.big == nil {
		s.big = map[string]struct{}{}
	}
	s.big[k] = struct{}{}
	return true
}

// IsPlain reports whether s holds no byte a JSON string must escape or a
// reader must check (< 0x20, >= 0x80, '"', '\\'), reading it in
// words (overlapping ones at the end) rather than byte by byte: a byte loop
// costs about ten nanoseconds per byte inside a WebAssembly guest.
func IsPlain(s string) bool {
	n := len(s)
	var w uint64
	switch {
	case n >= 8:
		for i := 0; i+8 < n; i += 8 {
			w |= specialBits(stringWord(s, i))
		}
		return w|specialBits(stringWord(s, n-8)) == 0
	case n >= 4:
		w = word32(s, 0) | word32(s, n-4)<<32
	case n > 0:
		// Pad with a byte that is never special.
		w = uint64(s[0]) | uint64(s[n/2])<<8 | uint64(s[n-1])<<16 | 'a'*(lsb>>24)<<24
	default:
		return true
	}
	return specialBits(w) == 0
}

// PlainPrefix returns the length of the longest prefix of s, in whole
// 8-byte words, holding no byte IsPlain refuses.
func PlainPrefix(s string) int {
	b := unsafe.Slice(unsafe.StringData(s), len(s))
	i := 0
	for ; i+32 <= len(b); i += 32 {
		if specialBits(word(b, i))|specialBits(word(b, i+8))|specialBits(word(b, i+16))|specialBits(word(b, i+24)) != 0 {
			break
		}
	}
	for ; i+8 <= len(b); i += 8 {
		if specialBits(word(b, i)) != 0 {
			break
		}
	}
	return i
}
