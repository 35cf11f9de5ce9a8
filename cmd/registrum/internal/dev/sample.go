package dev

import (
	"encoding/json"
	"fmt"
	"regexp/syntax"
	"strings"
	"unicode"

	"github.com/registrum/registrum/model"
)

// sampleValue returns a wire value the field accepts, or false when none can
// be made without other records (references) or is too intricate.
func sampleValue(f *model.Field, variant int) (any, bool) {
	switch f.Type {
	case model.TypeString, model.TypeText:
		s := fmt.Sprintf("example-%d", variant)
		if f.Pattern != "" {
			var ok bool
			if s, ok = matching(f.Pattern, variant); !ok {
				return nil, false
			}
		}
		if f.MinLength != nil && len([]rune(s)) < *f.MinLength {
			if f.Pattern != "" {
				return nil, false
			}
			s += strings.Repeat("x", *f.MinLength-len([]rune(s)))
		}
		if f.MaxLength != nil && len([]rune(s)) > *f.MaxLength {
			if f.Pattern != "" {
				return nil, false
			}
			s = string([]rune(s)[:*f.MaxLength])
		}
		return s, true
	case model.TypeInteger:
		v := int64(1 + variant)
		if f.Minimum != nil && v < *f.Minimum {
			v = *f.Minimum
		}
		if f.Maximum != nil && v > *f.Maximum {
			v = *f.Maximum
		}
		return v, true
	case model.TypeDecimal:
		if f.Scale != nil && *f.Scale > 0 {
			return fmt.Sprintf("%d.%s", 1+variant, strings.Repeat("0", *f.Scale)), true
		}
		return fmt.Sprint(1 + variant), true
	case model.TypeBoolean:
		return variant%2 == 0, true
	case model.TypeDate:
		return fmt.Sprintf("2026-01-%02d", 1+variant%28), true
	case model.TypeTimestamp:
		return fmt.Sprintf("2026-01-%02dT00:00:00Z", 1+variant%28), true
	case model.TypeUUID:
		return fmt.Sprintf("00000000-0000-4000-8000-%012d", variant), true
	case model.TypeCode:
		if len(f.Values) > 0 {
			return f.Values[variant%len(f.Values)], true
		}
	case model.TypeCRS84Point:
		return map[string]any{"type": "Point", "coordinates": []float64{24.94, 60.17}}, true
	case model.TypeStructured:
		var schema any
		if len(f.Schema) == 0 || json.Unmarshal(f.Schema, &schema) != nil {
			return nil, false
		}
		return instanceOf(schema, 0)
	}
	return nil, false
}

// matching returns a short string matching a pattern, built from its syntax
// tree: literals kept, each class's first member, repetitions at their minimum.
func matching(pattern string, variant int) (string, bool) {
	re, err := syntax.Parse(pattern, syntax.Perl)
	if err != nil {
		return "", false
	}
	var b strings.Builder
	if !build(&b, re.Simplify(), variant) {
		return "", false
	}
	return b.String(), true
}

func build(b *strings.Builder, re *syntax.Regexp, variant int) bool {
	switch re.Op {
	case syntax.OpLiteral:
		b.WriteString(string(re.Rune))
	case syntax.OpCharClass:
		if len(re.Rune) < 2 {
			return false
		}
		r := re.Rune[0]
		if span := re.Rune[1] - re.Rune[0]; span > 0 {
			r += rune(variant) % (span + 1)
		}
		if !unicode.IsPrint(r) {
			return false
		}
		b.WriteRune(r)
	case syntax.OpAnyCharNotNL, syntax.OpAnyChar:
		b.WriteByte('x')
	case syntax.OpBeginLine, syntax.OpEndLine, syntax.OpBeginText, syntax.OpEndText, syntax.OpEmptyMatch, syntax.OpWordBoundary, syntax.OpNoWordBoundary:
	case syntax.OpCapture, syntax.OpPlus:
		return build(b, re.Sub[0], variant)
	case syntax.OpStar, syntax.OpQuest:
	case syntax.OpRepeat:
		for i := 0; i < re.Min; i++ {
			if !build(b, re.Sub[0], variant) {
				return false
			}
		}
	case syntax.OpConcat:
		for _, sub := range re.Sub {
			if !build(b, sub, variant) {
				return false
			}
		}
	case syntax.OpAlternate:
		return build(b, re.Sub[0], variant)
	default:
		return false
	}
	return true
}

// instanceOf returns a small instance of a JSON Schema: objects with their
// required members, arrays of minItems (at least one) items, strings of
// minLength, numbers at their minimum.
func instanceOf(schema any, depth int) (any, bool) {
	s, ok := schema.(map[string]any)
	if !ok || depth > 8 {
		return nil, false
	}
	if v, ok := s["const"]; ok {
		return v, true
	}
	if e, ok := s["enum"].([]any); ok && len(e) > 0 {
		return e[0], true
	}
	typ, _ := s["type"].(string)
	switch typ {
	case "object":
		out := map[string]any{}
		props, _ := s["properties"].(map[string]any)
		req, _ := s["required"].([]any)
		for _, r := range req {
			name, _ := r.(string)
			v, ok := instanceOf(props[name], depth+1)
			if !ok {
				return nil, false
			}
			out[name] = v
		}
		return out, true
	case "array":
		n := 1
		if m, ok := s["minItems"].(float64); ok && int(m) > n {
			n = int(m)
		}
		var items []any
		for i := 0; i < n; i++ {
			v, ok := instanceOf(s["items"], depth+1)
			if !ok {
				return nil, false
			}
			items = append(items, v)
		}
		return items, true
	case "string":
		str := "example"
		if m, ok := s["minLength"].(float64); ok && len(str) < int(m) {
			str += strings.Repeat("x", int(m)-len(str))
		}
		if m, ok := s["maxLength"].(float64); ok && len(str) > int(m) {
			str = str[:int(m)]
		}
		return str, true
	case "integer", "number":
		if m, ok := s["minimum"].(float64); ok {
			return m, true
		}
		return 1, true
	case "boolean":
		return true, true
	}
	return nil, false
}
