package query

import (
	"errors"
	"strconv"
	"strings"
	"unicode/utf8"

	"github.com/registrum/registrum/model"
	"github.com/registrum/registrum/model/values"
)

// codec checks literals with the wire rules of model/values. The literal
// checks used here need no compiled pattern or schema, so the zero codec
// serves every package.
var codec values.Codec

func isOrdering(op string) bool { return op == "gt" || op == "ge" || op == "lt" || op == "le" }

// checkFunction checks startswith(f, text) and contains(f, text).
func checkFunction(f *model.Field, fn, text string) error {
	switch f.Type {
	case model.TypeString, model.TypeText, model.TypeCode:
	default:
		return invalid("%s: %s applies to string, text and code fields; %s is a %s field.", OptFilter, fn, echo(f.APIName), f.Type)
	}
	return checkText(f, text)
}

func checkText(f *model.Field, s string) error {
	if strings.IndexByte(s, 0) >= 0 {
		return invalid("%s: the string compared with %s contains a NUL character.", OptFilter, echo(f.APIName))
	}
	if f.MaxLength != nil && utf8.RuneCountInString(s) > *f.MaxLength {
		return invalid("%s: the string compared with %s is longer than the field's maximum of %d characters.", OptFilter, echo(f.APIName), *f.MaxLength)
	}
	return nil
}

// checkLiteral checks that a literal token fits field f compared with op
// ("eq", "ne", "gt", "ge", "lt", "le" or "in") and returns its storage form
// (nil for null).
func checkLiteral(f *model.Field, op string, t token) (any, error) {
	name := f.APIName // quoted below, only when refusing
	if t.kind == tWord && t.text == "null" {
		if op != "eq" && op != "ne" {
			return nil, invalid("%s: null compares only with eq and ne (field %s).", OptFilter, echo(name))
		}
		return nil, nil
	}
	switch f.Type {
	case model.TypeStructured, model.TypeCRS84Point:
		return nil, invalid("%s: %s is a %s field: it compares only with eq null and ne null.", OptFilter, echo(name), f.Type)
	case model.TypeBoolean:
		if isOrdering(op) {
			return nil, invalid("%s: %s is a boolean field: it compares only with eq, ne and in.", OptFilter, echo(name))
		}
	}
	wantQuoted := false
	switch f.Type {
	case model.TypeString, model.TypeText, model.TypeCode, model.TypeUUID, model.TypeReference:
		wantQuoted = true
	}
	switch {
	case wantQuoted && t.kind != tString:
		return nil, invalid("%s: %s is a %s field: its literals are single-quoted strings.", OptFilter, echo(name), f.Type)
	case !wantQuoted && t.kind == tString:
		return nil, invalid("%s: %s is a %s field: its literals are written bare, without quotes.", OptFilter, echo(name), f.Type)
	}
	switch f.Type {
	case model.TypeString, model.TypeText:
		if err := checkText(f, t.text); err != nil {
			return nil, err
		}
		return t.text, nil
	case model.TypeInteger:
		n, ok := ParseInteger(t.text)
		if !ok {
			return nil, invalid("%s: %s is an integer field: %s is not an integer within the 64-bit range.", OptFilter, echo(name), echo(t.text))
		}
		return n, nil
	case model.TypeBoolean:
		if t.kind != tWord || (t.text != "true" && t.text != "false") {
			return nil, invalid("%s: %s is a boolean field: its literals are true and false.", OptFilter, echo(name))
		}
		return t.text == "true", nil
	case model.TypeDecimal, model.TypeDate, model.TypeTimestamp:
		if t.kind != tBare {
			return nil, invalid("%s: %s is a %s field: %s is not one of its literals.", OptFilter, echo(name), f.Type, echo(t.text))
		}
	}
	v, err := codec.Decode(f, t.text)
	if err != nil {
		var fault *values.Fault
		if errors.As(err, &fault) {
			return nil, invalid("%s: %s.", OptFilter, strings.TrimSuffix(fault.Msg, "."))
		}
		return nil, invalid("%s: %s cannot be compared with %s.", OptFilter, echo(name), echo(t.text))
	}
	return v, nil
}

// ParseInteger parses a bare integer literal: optional minus, no leading
// zeros, no plus, within the 64-bit range.
func ParseInteger(s string) (int64, bool) {
	digits := strings.TrimPrefix(s, "-")
	if digits == "" || (len(digits) > 1 && digits[0] == '0') {
		return 0, false
	}
	for _, c := range []byte(digits) {
		if c < '0' || c > '9' {
			return 0, false
		}
	}
	n, err := strconv.ParseInt(s, 10, 64)
	return n, err == nil
}
