package canonjson

import (
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"slices"
	"strconv"
	"unicode/utf16"
	"unicode/utf8"

	"github.com/registrum/registrum/internal/strictjson"
)

// The appenders below are the fast, reflection-free half of the package:
// the one place that writes a JSON string, a number or a member order the
// RFC 8785 way. Every hand-assembled JSON writer of Registrum uses them, and
// what they write equals what Marshal writes for the same value.

const hexDigits = "0123456789abcdef"

// AppendString appends s as an RFC 8785 JSON string: '"' and '\\' escaped,
// \b \t \n \f \r in their short forms, other control characters as \u00xx,
// everything else as it is. Invalid UTF-8 becomes U+FFFD, as Marshal does.
func AppendString(buf []byte, s string) []byte {
	if strictjson.IsPlain(s) {
		// The common case: the string as it is, between quotes, in one
		// copy (inside a WebAssembly guest every loop iteration and every
		// call is costly, so fewer of them matter more).
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
	i := strictjson.PlainPrefix(s)
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
			case '\b':
				buf = append(buf, '\\', 'b')
			case '\f':
				buf = append(buf, '\\', 'f')
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

// AppendNumber appends f in its RFC 8785 form (ECMAScript's Number to
// String: shortest round-trip digits, plain notation from 1e-6 up to 1e21,
// exponent notation outside, and 0 for negative zero). NaN and infinities
// are not JSON.
func AppendNumber(buf []byte, f float64) ([]byte, error) {
	if math.IsNaN(f) || math.IsInf(f, 0) {
		return nil, errors.New("json: NaN and infinities are not JSON")
	}
	if f == 0 {
		return append(buf, '0'), nil
	}
	format := byte('f')
	if abs := math.Abs(f); abs < 1e-6 || abs >= 1e21 {
		format = 'e'
	}
	buf = strconv.AppendFloat(buf, f, format, -1, 64)
	if format == 'e' {
		// 1e-07 is 1e-7 in ECMAScript.
		if n := len(buf); n >= 4 && buf[n-4] == 'e' && buf[n-3] == '-' && buf[n-2] == '0' {
			buf[n-2] = buf[n-1]
			buf = buf[:n-1]
		}
	}
	return buf, nil
}

// SortedNames appends m's member names to names and sorts them in RFC 8785
// order (by UTF-16 code units). Callers pass a small array on their stack,
// so a map of up to its size costs no allocation: inside a WebAssembly
// guest each allocation costs about half a microsecond.
func SortedNames[V any](m map[string]V, names []string) []string {
	utf8Order := true
	for k := range m {
		names = append(names, k)
		if utf8Order && !strictjson.IsPlain(k) {
			utf8Order = false
		}
	}
	if utf8Order {
		slices.Sort(names)
	} else {
		slices.SortFunc(names, compareUTF16)
	}
	return names
}

// NameBuf is the stack array callers of SortedNames usually pass.
type NameBuf [8]string

// compareUTF16 orders a and b by their UTF-16 code units.
func compareUTF16(a, b string) int {
	for a != "" && b != "" {
		ra, na := utf8.DecodeRuneInString(a)
		rb, nb := utf8.DecodeRuneInString(b)
		if ra != rb {
			return utf16Unit(ra) - utf16Unit(rb)
		}
		a, b = a[na:], b[nb:]
	}
	return len(a) - len(b)
}

// utf16Unit returns the first UTF-16 code unit of r.
func utf16Unit(r rune) int {
	if r1, _ := utf16.EncodeRune(r); r1 != utf8.RuneError {
		return int(r1)
	}
	return int(r)
}

// AppendObject appends m as a JSON object, members in RFC 8785 order, each
// value written by value.
func AppendObject[V any](buf []byte, m map[string]V, value func(buf []byte, v V) ([]byte, error)) ([]byte, error) {
	buf = append(buf, '{')
	for i, k := range SortedNames(m, (&NameBuf{})[:0]) {
		if i > 0 {
			buf = append(buf, ',')
		}
		buf = append(AppendString(buf, k), ':')
		var err error
		if buf, err = value(buf, m[k]); err != nil {
			return nil, err
		}
	}
	return append(buf, '}'), nil
}

// AppendValue appends a decoded JSON value (what strictjson.Decode returns:
// map[string]any, []any, string, json.Number, bool or nil; float64 and the
// other Go numbers as well) in its RFC 8785 form, the bytes Marshal writes
// for the same value, without reflection or a second parse.
func AppendValue(buf []byte, v any) ([]byte, error) {
	switch x := v.(type) {
	case nil:
		return append(buf, "null"...), nil
	case bool:
		if x {
			return append(buf, "true"...), nil
		}
		return append(buf, "false"...), nil
	case string:
		return AppendString(buf, x), nil
	case json.Number:
		if !strictjson.IsNumber(string(x)) {
			// strconv takes more (hexadecimal, a leading '+' or '.'),
			// encoding/json refuses it.
			return nil, fmt.Errorf("canonjson: %q is not a JSON number", string(x))
		}
		f, err := strconv.ParseFloat(string(x), 64)
		if err != nil {
			return nil, fmt.Errorf("canonjson: number %s: %w", x, err)
		}
		return AppendNumber(buf, f)
	case float64:
		return AppendNumber(buf, x)
	case int:
		return AppendNumber(buf, float64(x))
	case int64:
		return AppendNumber(buf, float64(x))
	case map[string]any:
		if x == nil {
			return append(buf, "null"...), nil // as encoding/json writes a nil map
		}
		return AppendObject(buf, x, AppendValue)
	case []any:
		if x == nil {
			return append(buf, "null"...), nil // and a nil slice
		}
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
	}
	return nil, fmt.Errorf("canonjson: %T is not a decoded JSON value", v)
}

// CanonicalNumbers rewrites every json.Number of a decoded JSON value (as
// strictjson.Decode returns it: strings valid UTF-8) into its RFC 8785
// form, in place in maps and slices, and returns the value: what decoding
// the value's canonical form gives, without writing and parsing it again.
func CanonicalNumbers(v any) (any, error) {
	switch x := v.(type) {
	case json.Number:
		f, err := strconv.ParseFloat(string(x), 64)
		if err != nil {
			return nil, fmt.Errorf("canonjson: number %s: %w", x, err)
		}
		b, err := AppendNumber(make([]byte, 0, 24), f)
		if err != nil {
			return nil, err
		}
		return json.Number(b), nil
	case map[string]any:
		for k, e := range x {
			c, err := CanonicalNumbers(e)
			if err != nil {
				return nil, err
			}
			x[k] = c
		}
	case []any:
		for i, e := range x {
			c, err := CanonicalNumbers(e)
			if err != nil {
				return nil, err
			}
			x[i] = c
		}
	}
	return v, nil
}
