package contract

import (
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"math/bits"
	"slices"
	"strconv"
	"unicode/utf16"
	"unicode/utf8"
	"unsafe"
)

// MaxDepth bounds the nesting of arrays and objects ParseValue accepts.
const MaxDepth = 64

// ParseValue decodes one JSON document into plain Go values without
// reflection: objects become map[string]any, arrays []any, strings string,
// numbers json.Number (exact), true/false bool and null nil. Nesting deeper
// than MaxDepth, trailing data and invalid JSON are errors.
func ParseValue(b []byte) (any, error) {
	return parse(parser{b: b})
}

// ParseCheckedValue is ParseValue for a document the host has already
// checked with ParseValue: inside a WebAssembly guest it skips the per-byte
// validation of strings (control characters, UTF-8), which costs a sandbox
// check on every loop iteration, and strings without escapes share b's
// memory instead of being copied, so b must never change afterwards. On
// other input it may accept what ParseValue refuses; it never reads out of
// bounds.
func ParseCheckedValue(b []byte) (any, error) {
	return parse(parser{b: b, checked: true})
}

func parse(p parser) (any, error) {
	p.space()
	v, err := p.value(0)
	if err != nil {
		return nil, err
	}
	p.space()
	if p.i != len(p.b) {
		return nil, p.fail("trailing data")
	}
	return v, nil
}

type parser struct {
	b       []byte
	i       int
	checked bool
	plain   bool // the last string str read had no escapes and shares b (checked input)
}

func (p *parser) fail(what string) error {
	return fmt.Errorf("json: %s at byte %d", what, p.i)
}

func (p *parser) space() {
	for p.i < len(p.b) {
		switch p.b[p.i] {
		case ' ', '\t', '\n', '\r':
			p.i++
		default:
			return
		}
	}
}

func (p *parser) value(depth int) (any, error) {
	if p.i >= len(p.b) {
		return nil, p.fail("unexpected end")
	}
	switch c := p.b[p.i]; {
	case c == '{':
		return p.object(depth + 1)
	case c == '[':
		return p.array(depth + 1)
	case c == '"':
		return p.str()
	case c == 't':
		return true, p.literal("true")
	case c == 'f':
		return false, p.literal("false")
	case c == 'n':
		return nil, p.literal("null")
	case c == '-' || c >= '0' && c <= '9':
		return p.number()
	default:
		return nil, p.fail("unexpected character")
	}
}

func (p *parser) literal(word string) error {
	if len(p.b)-p.i < len(word) || string(p.b[p.i:p.i+len(word)]) != word {
		return p.fail("invalid literal")
	}
	p.i += len(word)
	return nil
}

func (p *parser) object(depth int) (any, error) {
	if depth > MaxDepth {
		return nil, p.fail("nesting too deep")
	}
	p.i++ // {
	m := map[string]any{}
	p.space()
	if p.i < len(p.b) && p.b[p.i] == '}' {
		p.i++
		return m, nil
	}
	for {
		k, v, err := p.member(depth)
		if err != nil {
			return nil, err
		}
		m[k] = v
		p.space()
		if p.i >= len(p.b) {
			return nil, p.fail("unexpected end")
		}
		switch p.b[p.i] {
		case ',':
			p.i++
		case '}':
			p.i++
			return m, nil
		default:
			return nil, p.fail("expected ',' or '}'")
		}
	}
}

// member reads one object member, `"key": value`, and the space before it.
func (p *parser) member(depth int) (string, any, error) {
	p.space()
	if p.i >= len(p.b) || p.b[p.i] != '"' {
		return "", nil, p.fail("expected object key")
	}
	k, err := p.str()
	if err != nil {
		return "", nil, err
	}
	p.space()
	if p.i >= len(p.b) || p.b[p.i] != ':' {
		return "", nil, p.fail("expected ':'")
	}
	p.i++
	p.space()
	v, err := p.value(depth)
	if err != nil {
		return "", nil, err
	}
	return k, v, nil
}

func (p *parser) array(depth int) (any, error) {
	if depth > MaxDepth {
		return nil, p.fail("nesting too deep")
	}
	p.i++ // [
	a := []any{}
	p.space()
	if p.i < len(p.b) && p.b[p.i] == ']' {
		p.i++
		return a, nil
	}
	for {
		p.space()
		v, err := p.value(depth)
		if err != nil {
			return nil, err
		}
		a = append(a, v)
		p.space()
		if p.i >= len(p.b) {
			return nil, p.fail("unexpected end")
		}
		switch p.b[p.i] {
		case ',':
			p.i++
		case ']':
			p.i++
			return a, nil
		default:
			return nil, p.fail("expected ',' or ']'")
		}
	}
}

func (p *parser) number() (any, error) {
	start := p.i
	if err := p.scanNumber(); err != nil {
		return nil, err
	}
	return json.Number(p.b[start:p.i]), nil
}

// scanNumber reads one JSON number without converting it.
func (p *parser) scanNumber() error {
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
		return p.fail("invalid number")
	}
	if p.i < len(p.b) && p.b[p.i] == '.' {
		p.i++
		if digits() == 0 {
			return p.fail("invalid number")
		}
	}
	if p.i < len(p.b) && (p.b[p.i] == 'e' || p.b[p.i] == 'E') {
		p.i++
		if p.i < len(p.b) && (p.b[p.i] == '+' || p.b[p.i] == '-') {
			p.i++
		}
		if digits() == 0 {
			return p.fail("invalid number")
		}
	}
	return nil
}

func (p *parser) str() (string, error) {
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
				return "", p.fail("invalid UTF-8 in string")
			}
			return string(s), nil
		}
		if c == '\\' {
			break
		}
		if c < 0x20 {
			return "", p.fail("control character in string")
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
				return "", p.fail("invalid UTF-8 in string")
			}
			return string(out), nil
		case c < 0x20:
			return "", p.fail("control character in string")
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
				return "", p.fail("invalid \\u escape")
			}
			if utf16.IsSurrogate(r) {
				r2 := rune(-1)
				if p.i+1 < len(p.b) && p.b[p.i] == '\\' && p.b[p.i+1] == 'u' {
					p.i += 2
					if r2, ok = p.hex4(); !ok {
						return "", p.fail("invalid \\u escape")
					}
				}
				r = utf16.DecodeRune(r, r2)
			}
			out = utf8.AppendRune(out, r)
		default:
			return "", p.fail("invalid escape")
		}
	}
	return "", p.fail("unterminated string")
}

func (p *parser) hex4() (rune, bool) {
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

// AppendValue appends the JSON encoding of v to buf without reflection. It
// accepts the values ParseValue produces plus the other Go numbers,
// json.RawMessage, []string and map[string]string. Object members are
// written in sorted key order, so the output is deterministic.
func AppendValue(buf []byte, v any) ([]byte, error) {
	switch x := v.(type) {
	case nil:
		return append(buf, "null"...), nil
	case bool:
		return strconv.AppendBool(buf, x), nil
	case string:
		return AppendString(buf, x), nil
	case json.Number:
		if _, err := ParseValue([]byte(x)); err != nil || x == "" {
			return nil, fmt.Errorf("json: invalid number %q", string(x))
		}
		return append(buf, x...), nil
	case json.RawMessage:
		if !json.Valid(x) {
			return nil, errors.New("json: invalid raw message")
		}
		return append(buf, x...), nil
	case int:
		return strconv.AppendInt(buf, int64(x), 10), nil
	case int64:
		return strconv.AppendInt(buf, x, 10), nil
	case int32:
		return strconv.AppendInt(buf, int64(x), 10), nil
	case uint:
		return strconv.AppendUint(buf, uint64(x), 10), nil
	case uint64:
		return strconv.AppendUint(buf, x, 10), nil
	case uint32:
		return strconv.AppendUint(buf, uint64(x), 10), nil
	case float64:
		return appendFloat(buf, x)
	case float32:
		return appendFloat(buf, float64(x))
	case []any:
		buf = append(buf, '[')
		for i, e := range x {
			if i > 0 {
				buf = append(buf, ',')
			}
			var err error
			if buf, err = AppendValue(buf, e); err != nil {
				return nil, err
			}
		}
		return append(buf, ']'), nil
	case []string:
		buf = append(buf, '[')
		for i, e := range x {
			if i > 0 {
				buf = append(buf, ',')
			}
			buf = AppendString(buf, e)
		}
		return append(buf, ']'), nil
	case map[string]any:
		buf = append(buf, '{')
		for i, k := range sortedKeys(x, (&keyBuf{})[:0]) {
			if i > 0 {
				buf = append(buf, ',')
			}
			buf = append(AppendString(buf, k), ':')
			var err error
			if buf, err = AppendValue(buf, x[k]); err != nil {
				return nil, err
			}
		}
		return append(buf, '}'), nil
	case map[string]string:
		buf = append(buf, '{')
		for i, k := range sortedKeys(x, (&keyBuf{})[:0]) {
			if i > 0 {
				buf = append(buf, ',')
			}
			buf = append(AppendString(buf, k), ':')
			buf = AppendString(buf, x[k])
		}
		return append(buf, '}'), nil
	default:
		return nil, fmt.Errorf("json: cannot encode a value of type %T", v)
	}
}

func appendFloat(buf []byte, f float64) ([]byte, error) {
	if math.IsNaN(f) || math.IsInf(f, 0) {
		return nil, errors.New("json: NaN and infinities are not JSON")
	}
	if f == math.Trunc(f) && math.Abs(f) < 1e15 {
		return strconv.AppendInt(buf, int64(f), 10), nil
	}
	return strconv.AppendFloat(buf, f, 'g', -1, 64), nil
}

// sortedKeys appends m's keys to keys and sorts them. Callers pass a small
// array on their stack, so a map of up to its size costs no allocation:
// inside a WebAssembly guest each allocation costs about half a
// microsecond.
func sortedKeys[V any](m map[string]V, keys []string) []string {
	for k := range m {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	return keys
}

// keyBuf is the stack array callers of sortedKeys pass.
type keyBuf [8]string

const hexDigits = "0123456789abcdef"

// AppendString appends s as a JSON string. Invalid UTF-8 becomes U+FFFD.
func AppendString(buf []byte, s string) []byte {
	// Find the longest prefix that needs no escaping, testing eight bytes
	// per step: inside a WebAssembly guest every loop iteration and every
	// call is costly, so fewer of them matter more than fewer instructions.
	if plain(s) {
		// The common case: the string as it is, between quotes, in one
		// copy.
		n := len(buf)
		if cap(buf)-n < len(s)+2 {
			buf = slices.Grow(buf, len(s)+2)
		}
		buf = buf[:n+len(s)+2]
		buf[n] = '"'
		copy(buf[n+1:], s)
		buf[n+1+len(s)] = '"'
		return buf
	}
	i := plainPrefix(s)
	buf = append(buf, '"')
	buf = append(buf, s[:i]...)
	start := i
	for i < len(s) {
		c := s[i]
		if c >= 0x20 && c != '"' && c != '\\' && c < utf8.RuneSelf {
			i++
			continue
		}
		if c < utf8.RuneSelf {
			buf = append(buf, s[start:i]...)
			switch c {
			case '"', '\\':
				buf = append(buf, '\\', c)
			case '\n':
				buf = append(buf, '\\', 'n')
			case '\r':
				buf = append(buf, '\\', 'r')
			case '\t':
				buf = append(buf, '\\', 't')
			default:
				buf = append(buf, '\\', 'u', '0', '0', hexDigits[c>>4], hexDigits[c&0xf])
			}
			i++
			start = i
			continue
		}
		r, size := utf8.DecodeRuneInString(s[i:])
		if r == utf8.RuneError && size == 1 {
			buf = append(buf, s[start:i]...)
			buf = append(buf, "\ufffd"...)
			i++
			start = i
			continue
		}
		i += size
	}
	buf = append(buf, s[start:]...)
	return append(buf, '"')
}

// plain reports whether s holds no byte specialBits flags, reading it in
// words (overlapping ones at the end) rather than byte by byte: a byte loop
// costs about ten nanoseconds per byte inside a WebAssembly guest.
func plain(s string) bool {
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

// plainPrefix returns the length of the longest prefix of s, in whole
// 8-byte words, holding no byte specialBits flags.
func plainPrefix(s string) int {
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

// AppendJSON appends the JSON encoding of r to buf, map members in sorted
// key order.
func (r PlanResult) AppendJSON(buf []byte) []byte {
	if r.Refusal != nil {
		buf = append(buf, `{"refusal":`...)
		return append(r.Refusal.appendJSON(buf), '}')
	}
	buf = append(buf, `{"effects":[`...)
	for i, e := range r.Effects {
		if i > 0 {
			buf = append(buf, ',')
		}
		buf = e.appendJSON(buf)
	}
	return append(buf, "]}"...)
}

func (e Effect) appendJSON(buf []byte) []byte {
	buf = appendEffectHead(buf, e.ID, e.Operation, e.Target)
	if len(e.Set) > 0 {
		buf = append(buf, `,"set":{`...)
		for i, k := range sortedKeys(e.Set, (&keyBuf{})[:0]) {
			if i > 0 {
				buf = append(buf, ',')
			}
			buf = append(AppendString(buf, k), ':')
			buf = e.Set[k].appendJSON(buf)
		}
		buf = append(buf, '}')
	}
	return append(appendClear(buf, e.Clear), '}')
}

// appendClear appends an effect's clear member, if it has one.
func appendClear(buf []byte, clear []string) []byte {
	if len(clear) == 0 {
		return buf
	}
	buf = append(buf, `,"clear":[`...)
	for i, f := range clear {
		if i > 0 {
			buf = append(buf, ',')
		}
		buf = AppendString(buf, f)
	}
	return append(buf, ']')
}

// appendEffectHead appends an effect's opening brace, id, operation and
// target; its set, clear and closing brace follow.
func appendEffectHead(buf []byte, id string, op Operation, t Target) []byte {
	buf = append(buf, `{"id":`...)
	buf = AppendString(buf, id)
	buf = append(buf, `,"operation":`...)
	buf = AppendString(buf, string(op))
	buf = append(buf, `,"target":{"entity":`...)
	buf = AppendString(buf, t.Entity)
	if t.FromField != "" {
		buf = append(buf, `,"fromField":`...)
		buf = AppendString(buf, t.FromField)
	}
	if t.FromEffect != "" {
		buf = append(buf, `,"fromEffect":`...)
		buf = AppendString(buf, t.FromEffect)
	}
	return append(buf, '}')
}

func (s FieldSource) appendJSON(buf []byte) []byte {
	buf = append(buf, '{')
	sep := false
	if s.Value != nil {
		buf = append(append(buf, `"value":`...), s.Value...)
		sep = true
	}
	if s.FromField != "" {
		if sep {
			buf = append(buf, ',')
		}
		buf = AppendString(append(buf, `"fromField":`...), s.FromField)
		sep = true
	}
	if s.FromEffect != "" {
		if sep {
			buf = append(buf, ',')
		}
		buf = AppendString(append(buf, `"fromEffect":`...), s.FromEffect)
	}
	return append(buf, '}')
}

func (r Refusal) appendJSON(buf []byte) []byte {
	buf = append(buf, '{')
	sep := false
	for _, m := range [...]struct{ k, v string }{{"code", r.Code}, {"field", r.Field}, {"kind", r.Kind}} {
		if m.v == "" {
			continue
		}
		if sep {
			buf = append(buf, ',')
		}
		buf = AppendString(append(AppendString(buf, m.k), ':'), m.v)
		sep = true
	}
	return append(buf, '}')
}

// AppendJSON appends the JSON encoding of r to buf.
func (r HookResult) AppendJSON(buf []byte) []byte {
	buf = append(buf, `{"outcome":`...)
	buf = AppendString(buf, string(r.Outcome))
	if r.Kind != "" {
		buf = AppendString(append(buf, `,"kind":`...), r.Kind)
	}
	return append(buf, '}')
}

// AppendJSON appends the JSON encoding of r to buf, map members in sorted
// key order.
func (r ActionResult) AppendJSON(buf []byte) []byte {
	if r.Refusal != nil {
		buf = append(buf, `{"refusal":`...)
		return append(r.Refusal.appendJSON(buf), '}')
	}
	buf = append(buf, `{"writes":[`...)
	for i, w := range r.Writes {
		if i > 0 {
			buf = append(buf, ',')
		}
		buf = AppendString(append(buf, `{"id":`...), w.ID)
		buf = append(buf, `,"set":{`...)
		for j, k := range sortedKeys(w.Set, (&keyBuf{})[:0]) {
			if j > 0 {
				buf = append(buf, ',')
			}
			buf = append(append(AppendString(buf, k), ':'), w.Set[k]...)
		}
		buf = append(buf, "}}"...)
	}
	return append(buf, "]}"...)
}

// ParseObjectMember parses a JSON document that must be an object holding
// exactly one member, name, whose value is an object; it returns that inner
// object. It reads PlannerInput ("request") and ActionInput ("inputs").
//
// It parses with ParseCheckedValue: its callers are guests reading input the
// host has checked. The outer object is read without building a map for it:
// a new map costs several microseconds inside a WebAssembly guest.
func ParseObjectMember(b []byte, name string) (map[string]any, error) {
	p := parser{b: b, checked: true}
	var obj map[string]any
	err := p.onlyMember(name, func() (bool, error) {
		v, err := p.value(1)
		m, ok := v.(map[string]any)
		if ok {
			obj = m
		}
		return ok, err
	})
	if err != nil {
		return nil, err
	}
	return obj, nil
}

// onlyMember reads a document that must be an object holding only the
// member name (repeated or not). For each occurrence it calls value with p
// at the member's value, which value reads, reporting whether it is an
// object; the last occurrence must be one.
func (p *parser) onlyMember(name string, value func() (bool, error)) error {
	p.space()
	if p.i >= len(p.b) || p.b[p.i] != '{' {
		return errors.New("input: not a JSON object")
	}
	p.i++
	found := false
	for first := true; ; first = false {
		p.space()
		if first && p.i < len(p.b) && p.b[p.i] == '}' {
			p.i++
			break
		}
		k, err := p.key()
		if err != nil {
			return err
		}
		// A repeated member: the last one wins, as in a parsed map.
		if found, err = value(); err != nil {
			return err
		}
		if k != name {
			return fmt.Errorf("input: only the member %q is allowed", name)
		}
		p.space()
		if p.i >= len(p.b) {
			return p.fail("unexpected end")
		}
		c := p.b[p.i]
		p.i++
		if c == '}' {
			break
		}
		if c != ',' {
			p.i--
			return p.fail("expected ',' or '}'")
		}
	}
	p.space()
	if p.i != len(p.b) {
		return p.fail("trailing data")
	}
	if !found {
		return fmt.Errorf("input.%s: missing or not an object", name)
	}
	return nil
}
