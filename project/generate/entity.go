package generate

import (
	"errors"
	"fmt"
	"math"
	"strconv"

	"github.com/registrum/registrum/model"
)

// Patterns of the string-encoded field types.
const (
	// UUIDPattern is the canonical lowercase, hyphenated UUID.
	UUIDPattern = `^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$`
	// DatePattern is a calendar date, YYYY-MM-DD.
	DatePattern = `^[0-9]{4}-(0[1-9]|1[0-2])-(0[1-9]|[12][0-9]|3[01])$`
	// TimestampPattern is an RFC 3339 timestamp in UTC ("Z"), with an
	// optional fraction of one to six digits (microseconds, the store's precision).
	TimestampPattern = `^[0-9]{4}-(0[1-9]|1[0-2])-(0[1-9]|[12][0-9]|3[01])T([01][0-9]|2[0-3]):[0-5][0-9]:([0-5][0-9]|60)(\.[0-9]{1,6})?Z$`
)

// EntitySchemaID returns the $id of an entity's JSON Schema:
// {metadata_base}/schemas/<entity-id>.schema.json.
func EntitySchemaID(p *model.Package, entityID string) (string, error) {
	if p.Registry.URLs.MetadataBase == "" {
		return "", errors.New("generate: registry.urls.metadataBase is empty; schema identifiers are published under it")
	}
	return joinURL(p.Registry.URLs.MetadataBase, model.EntitySchemaPath(entityID)), nil
}

// EntitySchema returns the JSON Schema (2020-12) of an entity's domain data:
// one property per field under its apiName, the required fields listed, no
// other member allowed.
func EntitySchema(p *model.Package, e *model.Entity) ([]byte, error) {
	doc, err := entitySchemaDoc(p, e)
	if err != nil {
		return nil, err
	}
	b, err := encode(doc)
	if err != nil {
		return nil, fmt.Errorf("generate: entity %s schema: %w", e.ID, err)
	}
	return b, nil
}

// entitySchemaDoc builds the entity's schema as a standalone document.
func entitySchemaDoc(p *model.Package, e *model.Entity) (obj, error) {
	id, err := EntitySchemaID(p, e.ID)
	if err != nil {
		return nil, err
	}
	body, err := domainDataSchema(e, dataFull)
	if err != nil {
		return nil, err
	}
	body["$schema"] = JSONSchemaDialect
	body["$id"] = id
	body["title"] = e.ID
	body["x-registry-entity"] = e.ID
	body["x-registry-mutationMode"] = string(e.MutationMode)
	return body, nil
}

// dataView selects which variant of an entity's domain data a schema describes.
type dataView int

const (
	// dataFull is the stored record: every field, required ones required,
	// attachment slots read-only.
	dataFull dataView = iota
	// dataWrite is a create body: writable fields only (no attachment slot).
	dataWrite
	// dataRead is a read: every member optional, since reads are narrowed
	// to the grant's readable fields and to $select.
	dataRead
)

// domainDataSchema returns the object schema of an entity's domain data.
func domainDataSchema(e *model.Entity, view dataView) (obj, error) {
	props := obj{}
	required := []string{}
	for _, f := range e.Fields {
		s, err := FieldSchema(f)
		if err != nil {
			return nil, fmt.Errorf("generate: entity %s: %w", e.ID, err)
		}
		if err := addProperty(props, f.APIName, s, "entity "+e.ID); err != nil {
			return nil, err
		}
		if f.Required && view != dataRead {
			required = append(required, f.APIName)
		}
	}
	if view != dataWrite {
		for _, s := range slotsOf(e) {
			if err := addProperty(props, s.name, s.schema, "entity "+e.ID); err != nil {
				return nil, err
			}
		}
	}
	return closedObject(props, required), nil
}

// FieldSchema returns the JSON Schema of one field's wire value: the type's
// encoding and bounds, wrapped as anyOf the type and null when the field is
// optional (optional fields are nullable).
func FieldSchema(f *model.Field) (obj, error) {
	s, err := typeSchema(f)
	if err != nil {
		return nil, err
	}
	if f.Nullable() {
		s = obj{"anyOf": []any{s, obj{"type": "null"}}}
	}
	s["x-registry-field"] = f.ID
	return s, nil
}

// typeSchema returns the non-null schema of a field's type.
func typeSchema(f *model.Field) (obj, error) {
	switch f.Type {
	case model.TypeString, model.TypeText:
		s := obj{"type": "string"}
		if f.MinLength != nil {
			s["minLength"] = *f.MinLength
		}
		if f.MaxLength != nil {
			s["maxLength"] = *f.MaxLength
		}
		if f.Pattern != "" {
			s["pattern"] = f.Pattern
		}
		return s, nil
	case model.TypeInteger:
		lo, hi := int64(math.MinInt64), int64(math.MaxInt64)
		if f.Minimum != nil {
			lo = *f.Minimum
		}
		if f.Maximum != nil {
			hi = *f.Maximum
		}
		return obj{"type": "integer", "format": "int64", "minimum": lo, "maximum": hi}, nil
	case model.TypeDecimal:
		pattern, err := DecimalPattern(f.Precision, f.Scale)
		if err != nil {
			return nil, fmt.Errorf("field %s: %w", f.ID, err)
		}
		s := obj{"type": "string", "pattern": pattern}
		if f.Precision != nil {
			s["x-registry-precision"] = *f.Precision
		}
		s["x-registry-scale"] = scaleOf(f.Scale)
		return s, nil
	case model.TypeBoolean:
		return obj{"type": "boolean"}, nil
	case model.TypeDate:
		return obj{"type": "string", "format": "date", "pattern": DatePattern}, nil
	case model.TypeTimestamp:
		return obj{"type": "string", "format": "date-time", "pattern": TimestampPattern}, nil
	case model.TypeUUID:
		return obj{"type": "string", "format": "uuid", "pattern": UUIDPattern}, nil
	case model.TypeCode:
		if len(f.Values) == 0 {
			return nil, fmt.Errorf("field %s: a code field needs a nonempty vocabulary", f.ID)
		}
		values := make([]any, len(f.Values))
		for i, v := range f.Values {
			values[i] = v
		}
		return obj{"type": "string", "enum": values}, nil
	case model.TypeReference:
		if f.Target == "" {
			return nil, fmt.Errorf("field %s: a reference field needs a target entity", f.ID)
		}
		return obj{"type": "string", "format": "uuid", "pattern": UUIDPattern, "x-registry-reference": f.Target}, nil
	case model.TypeCRS84Point:
		return pointSchema(), nil
	case model.TypeStructured:
		if len(f.Schema) == 0 {
			return nil, fmt.Errorf("field %s: a structured field needs an inline schema", f.ID)
		}
		v, err := decodeExact(f.Schema)
		if err != nil {
			return nil, fmt.Errorf("field %s: inline schema: %w", f.ID, err)
		}
		s, ok := v.(map[string]any)
		if !ok {
			return nil, fmt.Errorf("field %s: inline schema is not a JSON object", f.ID)
		}
		// The inline schema is embedded as a subschema of the entity's
		// 2020-12 schema, where $schema may not appear.
		delete(s, "$schema")
		return s, nil
	}
	return nil, fmt.Errorf("field %s: unknown type %q", f.ID, f.Type)
}

// pointSchema is a GeoJSON Point in CRS84: longitude then latitude, in degrees.
func pointSchema() obj {
	return obj{
		"type":                 "object",
		"required":             []any{"type", "coordinates"},
		"additionalProperties": false,
		"properties": obj{
			"type": obj{"const": "Point"},
			"coordinates": obj{
				"type":     "array",
				"minItems": 2,
				"maxItems": 2,
				"prefixItems": []any{
					obj{"type": "number", "minimum": -180, "maximum": 180},
					obj{"type": "number", "minimum": -90, "maximum": 90},
				},
				"items": obj{"type": "number"},
			},
		},
	}
}

func scaleOf(scale *int) int {
	if scale == nil {
		return 0
	}
	return *scale
}

// DecimalPattern returns the pattern of a decimal value encoded as a string
// with exactly scale fraction digits and at most precision digits in all:
// an optional minus sign, no leading zero, and a fraction only when scale > 0.
// A nil precision leaves the number of integer digits unbounded; a nil scale is 0.
func DecimalPattern(precision, scale *int) (string, error) {
	s := scaleOf(scale)
	if s < 0 {
		return "", fmt.Errorf("decimal scale %d is negative", s)
	}
	intPart := `(0|[1-9][0-9]*)`
	if precision != nil {
		p := *precision
		if p < 1 || p < s {
			return "", fmt.Errorf("decimal precision %d must be at least 1 and at least the scale %d", p, s)
		}
		switch digits := p - s; digits {
		case 0:
			intPart = `0`
		case 1:
			intPart = `[0-9]`
		default:
			intPart = `(0|[1-9][0-9]{0,` + strconv.Itoa(digits-1) + `})`
		}
	}
	if s == 0 {
		return `^-?` + intPart + `$`, nil
	}
	return `^-?` + intPart + `\.[0-9]{` + strconv.Itoa(s) + `}$`, nil
}
