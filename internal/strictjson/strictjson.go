// Package strictjson decodes untrusted JSON strictly: duplicate object
// members, trailing data and excessive nesting are refused, and numbers are
// kept exactly as json.Number.
package strictjson

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"strconv"
	"strings"
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
// numbers json.Number, and strings, booleans and null their Go forms.
func Decode(data []byte) (any, error) {
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.UseNumber()
	v, err := value(dec, "", 0)
	if err != nil {
		return nil, err
	}
	if _, err := dec.Token(); !errors.Is(err, io.EOF) {
		return nil, &SyntaxError{Msg: "unexpected data after the JSON value"}
	}
	return v, nil
}

func value(dec *json.Decoder, ptr string, depth int) (any, error) {
	tok, err := dec.Token()
	if err != nil {
		if errors.Is(err, io.EOF) {
			return nil, &SyntaxError{Pointer: ptr, Msg: "unexpected end of JSON input"}
		}
		return nil, &SyntaxError{Pointer: ptr, Msg: "malformed JSON: " + strings.TrimPrefix(err.Error(), "json: ")}
	}
	switch t := tok.(type) {
	case json.Delim:
		if depth >= MaxDepth {
			return nil, &SyntaxError{Pointer: ptr, Msg: fmt.Sprintf("nested deeper than %d levels", MaxDepth)}
		}
		switch t {
		case '{':
			obj := map[string]any{}
			for dec.More() {
				kt, err := dec.Token()
				if err != nil {
					return nil, &SyntaxError{Pointer: ptr, Msg: "malformed JSON: " + strings.TrimPrefix(err.Error(), "json: ")}
				}
				key := kt.(string)
				child := ptr + "/" + escape(key)
				if _, dup := obj[key]; dup {
					return nil, &SyntaxError{Pointer: child, Msg: "duplicate member " + strconv.Quote(key)}
				}
				v, err := value(dec, child, depth+1)
				if err != nil {
					return nil, err
				}
				obj[key] = v
			}
			if _, err := dec.Token(); err != nil {
				return nil, &SyntaxError{Pointer: ptr, Msg: "malformed JSON object"}
			}
			return obj, nil
		case '[':
			arr := []any{}
			for i := 0; dec.More(); i++ {
				v, err := value(dec, ptr+"/"+strconv.Itoa(i), depth+1)
				if err != nil {
					return nil, err
				}
				arr = append(arr, v)
			}
			if _, err := dec.Token(); err != nil {
				return nil, &SyntaxError{Pointer: ptr, Msg: "malformed JSON array"}
			}
			return arr, nil
		}
		return nil, &SyntaxError{Pointer: ptr, Msg: "malformed JSON"}
	default:
		return t, nil
	}
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
