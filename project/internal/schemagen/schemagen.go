// Package schemagen derives a JSON Schema (2020-12) from Go struct types,
// reading the json tag for member names, the schema tag for constraints and
// the doc tag for descriptions. Every struct becomes a $defs entry with
// additionalProperties false, so the schema is as strict as the decoder.
//
// Schema tag items, comma separated: required, ident (identifier grammar),
// digest (sha256:<64 hex>), const=V, enum=a|b, items=a|b (enum of array
// items), pattern=RE, format=F, minimum=N, maximum=N, minLength=N,
// maxLength=N, minItems=N, maxItems=N. A type with a method
// JSONSchema(ref func(any) map[string]any) map[string]any supplies its own.
package schemagen

import (
	"reflect"
	"strconv"
	"strings"
)

// IdentPattern is the grammar of every authored identifier.
const IdentPattern = `^[a-z][a-z0-9_-]{0,63}$`

// DigestPattern is the shape of a pinned digest.
const DigestPattern = `^sha256:[0-9a-f]{64}$`

// Custom is implemented by types that describe their own schema.
type Custom interface {
	JSONSchema(ref func(any) map[string]any) map[string]any
}

type generator struct {
	defs map[string]any
}

// Generate returns the schema of root with the given $id and title.
func Generate(root any, id, title string) map[string]any {
	g := &generator{defs: map[string]any{}}
	rootRef := g.ref(reflect.TypeOf(root))
	return map[string]any{
		"$schema": "https://json-schema.org/draft/2020-12/schema",
		"$id":     id,
		"title":   title,
		"$ref":    rootRef["$ref"],
		"$defs":   g.defs,
	}
}

func (g *generator) ref(t reflect.Type) map[string]any {
	for t.Kind() == reflect.Pointer {
		t = t.Elem()
	}
	name := t.Name()
	if _, done := g.defs[name]; !done {
		g.defs[name] = true // placeholder against recursion
		g.defs[name] = g.structSchema(t)
	}
	return map[string]any{"$ref": "#/$defs/" + name}
}

func (g *generator) structSchema(t reflect.Type) map[string]any {
	if c, ok := reflect.Zero(t).Interface().(Custom); ok {
		return c.JSONSchema(func(v any) map[string]any { return g.ref(reflect.TypeOf(v)) })
	}
	props := map[string]any{}
	var required []any
	for i := 0; i < t.NumField(); i++ {
		f := t.Field(i)
		name, _, _ := strings.Cut(f.Tag.Get("json"), ",")
		if name == "" || name == "-" {
			continue
		}
		s := g.typeSchema(f.Type)
		tags := parseTag(f.Tag.Get("schema"))
		if _, ok := tags["required"]; ok {
			required = append(required, name)
		}
		apply(s, tags)
		if d := f.Tag.Get("doc"); d != "" {
			s["description"] = d
		}
		props[name] = s
	}
	out := map[string]any{"type": "object", "additionalProperties": false, "properties": props}
	if len(required) > 0 {
		out["required"] = required
	}
	return out
}

func (g *generator) typeSchema(t reflect.Type) map[string]any {
	for t.Kind() == reflect.Pointer {
		t = t.Elem()
	}
	if t.Kind() == reflect.Struct {
		r := g.ref(t)
		return map[string]any{"$ref": r["$ref"]}
	}
	switch t.Kind() {
	case reflect.String:
		return map[string]any{"type": "string"}
	case reflect.Bool:
		return map[string]any{"type": "boolean"}
	case reflect.Int, reflect.Int32, reflect.Int64:
		return map[string]any{"type": "integer"}
	case reflect.Float64:
		return map[string]any{"type": "number"}
	case reflect.Slice:
		return map[string]any{"type": "array", "items": g.typeSchema(t.Elem())}
	case reflect.Map:
		if t.Elem().Kind() == reflect.Interface {
			return map[string]any{"type": "object"}
		}
		return map[string]any{"type": "object", "additionalProperties": g.typeSchema(t.Elem())}
	default: // interface: any JSON value
		return map[string]any{}
	}
}

func parseTag(tag string) map[string]string {
	out := map[string]string{}
	if tag == "" {
		return out
	}
	// Patterns may hold commas: the pattern item takes the rest of the tag.
	for tag != "" {
		var item string
		if strings.HasPrefix(tag, "pattern=") {
			item, tag = tag, ""
		} else {
			item, tag, _ = strings.Cut(tag, ",")
		}
		k, v, _ := strings.Cut(item, "=")
		out[k] = v
	}
	return out
}

func apply(s map[string]any, tags map[string]string) {
	target := s
	if s["type"] == "array" {
		if items, ok := s["items"].(map[string]any); ok {
			target = items
		}
	}
	for k, v := range tags {
		switch k {
		case "ident":
			target["pattern"] = IdentPattern
		case "digest":
			target["pattern"] = DigestPattern
		case "const":
			s["const"] = v
		case "enum":
			s["enum"] = words(v)
		case "items":
			target["enum"] = words(v)
		case "pattern":
			target["pattern"] = v
		case "format":
			target["format"] = v
		case "minimum", "maximum", "minLength", "maxLength":
			n, _ := strconv.ParseInt(v, 10, 64)
			target[k] = n
		case "minItems", "maxItems":
			n, _ := strconv.ParseInt(v, 10, 64)
			s[k] = n
		}
	}
}

func words(v string) []any {
	var out []any
	for _, w := range strings.Split(v, "|") {
		out = append(out, w)
	}
	return out
}
