// Package values converts field values between their wire encoding (JSON,
// as decoded by internal/strictjson) and their storage form (what the store
// writes and reads), checking every type bound on the way in.
//
// Wire encodings: string, text and code are JSON strings; integer a JSON
// integer within int64; decimal a string with exactly the field's scale;
// boolean a JSON boolean; date "YYYY-MM-DD"; timestamp an RFC 3339 string,
// answered in UTC; uuid and reference the lowercase hyphenated UUID form;
// crs84-point a GeoJSON Point; structured any JSON its inline schema admits.
// Optional fields are nullable.
package values

import (
	"bytes"
	"encoding/json"
	"fmt"
	"math/big"
	"regexp"
	"strconv"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/santhosh-tekuri/jsonschema/v6"

	"github.com/registrum/registrum/internal/canonjson"
	"github.com/registrum/registrum/internal/strictjson"
	"github.com/registrum/registrum/model"
)

// Fault is a value refused for a reason a client can act on.
type Fault struct{ Msg string }

func (f *Fault) Error() string { return f.Msg }

func faultf(format string, args ...any) *Fault { return &Fault{Msg: fmt.Sprintf(format, args...)} }

// Codec checks and converts the values of one package's fields. Build it once
// per package: it compiles patterns and inline schemas.
type Codec struct {
	patterns map[*model.Field]*regexp.Regexp
	schemas  map[*model.Field]*jsonschema.Schema
}

// NewCodec prepares the codec of every field of p.
func NewCodec(p *model.Package) (*Codec, error) {
	c := &Codec{patterns: map[*model.Field]*regexp.Regexp{}, schemas: map[*model.Field]*jsonschema.Schema{}}
	for _, e := range p.Entities {
		for _, f := range e.Fields {
			if err := c.prepare("entity "+e.ID+" field "+f.ID, "urn:registrum:field:"+e.ID+":"+f.ID, f); err != nil {
				return nil, err
			}
		}
	}
	return c, nil
}

// prepare compiles the pattern and the inline schema (named url) of field
// f; errors name the field as where.
func (c *Codec) prepare(where, url string, f *model.Field) error {
	if f.Pattern != "" {
		re, err := regexp.Compile(f.Pattern)
		if err != nil {
			return fmt.Errorf("values: %s: pattern: %w", where, err)
		}
		c.patterns[f] = re
	}
	if f.Type == model.TypeStructured && len(f.Schema) > 0 {
		doc, err := jsonschema.UnmarshalJSON(bytes.NewReader(f.Schema))
		if err != nil {
			return fmt.Errorf("values: %s: schema: %w", where, err)
		}
		comp := jsonschema.NewCompiler()
		if err := comp.AddResource(url, doc); err != nil {
			return fmt.Errorf("values: %s: schema: %w", where, err)
		}
		sch, err := comp.Compile(url)
		if err != nil {
			return fmt.Errorf("values: %s: schema: %w", where, err)
		}
		c.schemas[f] = sch
	}
	return nil
}

// Literal checks v, a wire value of field f written outside any record (a
// constraint value, a precondition, a value an effect sets, a hook
// condition), by exactly the rules Decode applies to a write: a literal
// passes here when, and only when, a write of it would. It returns the
// literal in the form the host answers it (Encode of its storage form:
// decimals with the field's scale, timestamps in UTC; integers as
// json.Number). Null passes only for an optional field, as in a write.
// Literal compiles f's pattern and schema for this one call; a Codec serves
// many values.
func Literal(f *model.Field, v any) (any, error) {
	c := &Codec{patterns: map[*model.Field]*regexp.Regexp{}, schemas: map[*model.Field]*jsonschema.Schema{}}
	if err := c.prepare("field "+f.ID, "urn:registrum:literal:"+f.ID, f); err != nil {
		return nil, err
	}
	stored, err := c.Decode(f, v)
	if err != nil {
		return nil, err
	}
	if i, ok := stored.(int64); ok {
		return json.Number(strconv.FormatInt(i, 10)), nil
	}
	return Encode(f, stored), nil
}

var (
	dateRE    = regexp.MustCompile(`^\d{4}-\d{2}-\d{2}$`)
	decimalRE = regexp.MustCompile(`^-?(0|[1-9][0-9]*)(\.[0-9]+)?$`)
)

// IsUUID reports whether s is a UUID in its lowercase hyphenated form.
func IsUUID(s string) bool {
	if len(s) != 36 {
		return false
	}
	for i := 0; i < len(s); i++ {
		c := s[i]
		switch i {
		case 8, 13, 18, 23:
			if c != '-' {
				return false
			}
		default:
			if (c < '0' || c > '9') && (c < 'a' || c > 'f') {
				return false
			}
		}
	}
	return true
}

// Decode checks a wire value (nil for JSON null) against the field and
// returns its storage form. A null for a required field is refused.
func (c *Codec) Decode(f *model.Field, v any) (any, error) {
	if v == nil {
		if f.Required {
			return nil, faultf("%s is required and cannot be null", f.APIName)
		}
		return nil, nil
	}
	switch f.Type {
	case model.TypeString, model.TypeText:
		s, ok := v.(string)
		if !ok {
			return nil, faultf("%s must be a string", f.APIName)
		}
		n := utf8.RuneCountInString(s)
		if f.MinLength != nil && n < *f.MinLength {
			return nil, faultf("%s must have at least %d characters", f.APIName, *f.MinLength)
		}
		if f.MaxLength != nil && n > *f.MaxLength {
			return nil, faultf("%s must have at most %d characters", f.APIName, *f.MaxLength)
		}
		if strings.ContainsRune(s, 0) {
			return nil, faultf("%s must not contain NUL characters", f.APIName)
		}
		if re := c.patterns[f]; re != nil && !re.MatchString(s) {
			return nil, faultf("%s does not match the pattern of the field", f.APIName)
		}
		return s, nil
	case model.TypeCode:
		s, ok := v.(string)
		if !ok {
			return nil, faultf("%s must be a string code", f.APIName)
		}
		for _, allowed := range f.Values {
			if s == allowed {
				return s, nil
			}
		}
		return nil, faultf("%s must be one of the codes of its vocabulary", f.APIName)
	case model.TypeInteger:
		n, ok := v.(json.Number)
		if !ok {
			return nil, faultf("%s must be an integer", f.APIName)
		}
		i, err := strconv.ParseInt(string(n), 10, 64)
		if err != nil {
			return nil, faultf("%s must be an integer within the 64-bit range", f.APIName)
		}
		if f.Minimum != nil && i < *f.Minimum {
			return nil, faultf("%s must be at least %d", f.APIName, *f.Minimum)
		}
		if f.Maximum != nil && i > *f.Maximum {
			return nil, faultf("%s must be at most %d", f.APIName, *f.Maximum)
		}
		return i, nil
	case model.TypeDecimal:
		s, ok := v.(string)
		if !ok || !decimalRE.MatchString(s) {
			return nil, faultf("%s must be a decimal number written as a string, such as \"12.50\"", f.APIName)
		}
		return decimal(f, s)
	case model.TypeBoolean:
		b, ok := v.(bool)
		if !ok {
			return nil, faultf("%s must be true or false", f.APIName)
		}
		return b, nil
	case model.TypeDate:
		s, ok := v.(string)
		if !ok || !dateRE.MatchString(s) {
			return nil, faultf("%s must be a date written YYYY-MM-DD", f.APIName)
		}
		if _, err := time.Parse(time.DateOnly, s); err != nil {
			return nil, faultf("%s is not a valid calendar date", f.APIName)
		}
		return s, nil
	case model.TypeTimestamp:
		s, ok := v.(string)
		if !ok {
			return nil, faultf("%s must be an RFC 3339 timestamp", f.APIName)
		}
		t, err := time.Parse(time.RFC3339Nano, s)
		if err != nil || !strings.ContainsAny(s[len(s)-1:], "Zz0123456789") {
			return nil, faultf("%s must be an RFC 3339 timestamp with a time zone", f.APIName)
		}
		if t.Nanosecond()%1000 != 0 {
			return nil, faultf("%s has more precision than microseconds", f.APIName)
		}
		return t.UTC(), nil
	case model.TypeUUID, model.TypeReference:
		s, ok := v.(string)
		if !ok || !IsUUID(s) {
			return nil, faultf("%s must be a UUID in lowercase hyphenated form", f.APIName)
		}
		return s, nil
	case model.TypeCRS84Point:
		return point(f, v)
	case model.TypeStructured:
		if sch := c.schemas[f]; sch != nil {
			if err := sch.Validate(v); err != nil {
				return nil, faultf("%s does not match the schema of the field", f.APIName)
			}
		}
		b, err := json.Marshal(v)
		if err != nil {
			return nil, faultf("%s is not valid JSON", f.APIName)
		}
		return json.RawMessage(b), nil
	}
	return nil, fmt.Errorf("values: field %s has unknown type %q", f.ID, f.Type)
}

func decimal(f *model.Field, s string) (any, error) {
	r, ok := new(big.Rat).SetString(s)
	if !ok {
		return nil, faultf("%s is not a decimal number", f.APIName)
	}
	scale := 0
	if i := strings.IndexByte(s, '.'); i >= 0 {
		scale = len(s) - i - 1
	}
	if f.Scale != nil && scale > *f.Scale {
		return nil, faultf("%s has more than %d digits after the decimal point", f.APIName, *f.Scale)
	}
	out := s
	if f.Scale != nil {
		out = r.FloatString(*f.Scale)
	}
	if f.Precision != nil {
		intPart, frac, _ := strings.Cut(strings.TrimPrefix(out, "-"), ".")
		if len(strings.TrimLeft(intPart, "0"))+len(frac) > *f.Precision {
			return nil, faultf("%s has more digits than the field's precision of %d", f.APIName, *f.Precision)
		}
	}
	return out, nil
}

func point(f *model.Field, v any) (any, error) {
	bad := faultf(`%s must be a GeoJSON Point {"type":"Point","coordinates":[longitude,latitude]} in CRS84 degrees`, f.APIName)
	m, ok := v.(map[string]any)
	if !ok || len(m) != 2 || m["type"] != "Point" {
		return nil, bad
	}
	coords, ok := m["coordinates"].([]any)
	if !ok || len(coords) != 2 {
		return nil, bad
	}
	var lonlat [2]float64
	for i, c := range coords {
		n, ok := c.(json.Number)
		if !ok {
			return nil, bad
		}
		x, err := n.Float64()
		if err != nil {
			return nil, bad
		}
		lonlat[i] = x
	}
	if lonlat[0] < -180 || lonlat[0] > 180 || lonlat[1] < -90 || lonlat[1] > 90 {
		return nil, faultf("%s has a longitude outside -180..180 or a latitude outside -90..90", f.APIName)
	}
	b, _ := json.Marshal(map[string]any{"type": "Point", "coordinates": []float64{lonlat[0], lonlat[1]}})
	return json.RawMessage(b), nil
}

// CheckStored checks v, a storage-form value of field f as the store reads
// it from a record's row (possibly written under an earlier package), by
// the rules Decode applies to a write under f's current metadata. The
// storage forms that are not their own wire form (integers, timestamps,
// JSON values) are turned into it first.
func (c *Codec) CheckStored(f *model.Field, v any) error {
	switch x := v.(type) {
	case int64:
		v = json.Number(strconv.FormatInt(x, 10))
	case int32:
		v = json.Number(strconv.FormatInt(int64(x), 10))
	case time.Time:
		v = Encode(f, x)
	case json.RawMessage:
		doc, err := strictjson.Decode(x)
		if err != nil {
			return fmt.Errorf("values: stored %s of field %s: %w", f.Type, f.ID, err)
		}
		v = doc
	}
	_, err := c.Decode(f, v)
	return err
}

// Encode returns the wire value of a storage-form value (nil for null).
// JSON values (points, structured) are answered in their canonical form
// (RFC 8785), whatever order the database keeps their members in.
func Encode(f *model.Field, v any) any {
	switch x := v.(type) {
	case nil:
		return nil
	case time.Time:
		return x.UTC().Format(time.RFC3339Nano)
	case json.RawMessage:
		if c, err := canonjson.Transform(x); err == nil {
			return json.RawMessage(c)
		}
		return x
	}
	return v
}
