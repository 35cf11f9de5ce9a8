package generate

import (
	"bytes"
	"encoding/json"
	"fmt"
	"sort"
	"strings"

	"github.com/registrum/registrum/model"
)

// JSONSchemaDialect is the JSON Schema dialect of every generated schema.
const JSONSchemaDialect = "https://json-schema.org/draft/2020-12/schema"

// Roles of the generated files, as listed in model.File.Role.
const (
	RoleEntitySchema = "entity-schema"
	RoleOpenAPI      = "openapi"
	RoleEventSchema  = "event-schema"
	RoleFormSchema   = "form-schema"
)

// Role returns the role of a generated file from its package-relative path,
// or "" when the path is not one this package generates.
func Role(path string) string {
	switch {
	case path == model.OpenAPIPath:
		return RoleOpenAPI
	case strings.HasPrefix(path, model.EventSchemaDir+"/"):
		return RoleEventSchema
	case strings.HasPrefix(path, model.EntitySchemaDir+"/"):
		return RoleEntitySchema
	case strings.HasPrefix(path, model.FormSchemaDir+"/"):
		return RoleFormSchema
	}
	return ""
}

// All generates every artifact of p and returns them keyed by
// package-relative path (forward slashes). The bytes are stably indented JSON
// with object members in sorted order and a final newline, so the same model
// always gives the same bytes.
func All(p *model.Package) (map[string][]byte, error) {
	out := map[string][]byte{}
	for _, e := range p.Entities {
		b, err := EntitySchema(p, e)
		if err != nil {
			return nil, err
		}
		out[model.EntitySchemaPath(e.ID)] = b
	}
	events, err := EventSchemas(p)
	if err != nil {
		return nil, err
	}
	for path, b := range events {
		out[path] = b
	}
	forms, err := FormSchemas(p)
	if err != nil {
		return nil, err
	}
	for path, b := range forms {
		out[path] = b
	}
	doc, err := OpenAPI(p)
	if err != nil {
		return nil, err
	}
	out[model.OpenAPIPath] = doc
	return out, nil
}

// obj is a JSON object under construction; encoding/json writes its members
// in sorted order, which makes every document deterministic.
type obj = map[string]any

// addProperty adds a member to a properties object, refusing a name that
// is already there (two fields with one apiName, a slot named like a field).
func addProperty(props obj, name string, schema obj, where string) error {
	if _, dup := props[name]; dup {
		return fmt.Errorf("generate: %s: two members are named %q", where, name)
	}
	props[name] = schema
	return nil
}

// closedObject is an object schema with the given properties, no other
// member, and the required members when there are any.
func closedObject[T any](props obj, required []T) obj {
	out := obj{
		"type":                 "object",
		"additionalProperties": false,
		"properties":           props,
	}
	if len(required) > 0 {
		out["required"] = required
	}
	return out
}

// encode writes v as indented JSON without HTML escaping, with a final newline.
func encode(v any) ([]byte, error) {
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetEscapeHTML(false)
	enc.SetIndent("", "  ")
	if err := enc.Encode(v); err != nil {
		return nil, err
	}
	return buf.Bytes(), nil
}

// decodeExact parses a JSON document keeping numbers exactly as written.
func decodeExact(raw []byte) (any, error) {
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.UseNumber()
	var v any
	if err := dec.Decode(&v); err != nil {
		return nil, err
	}
	if dec.More() {
		return nil, fmt.Errorf("trailing data after the JSON value")
	}
	return v, nil
}

// joinURL appends a path to a base URL, with exactly one slash between them.
func joinURL(base, path string) string {
	return strings.TrimRight(base, "/") + "/" + strings.TrimLeft(path, "/")
}

// sortedKeys returns the keys of m in sorted order.
func sortedKeys[V any](m map[string]V) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	return keys
}
