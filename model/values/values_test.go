package values

import (
	"encoding/json"
	"errors"
	"testing"
	"time"

	"github.com/registrum/registrum/internal/strictjson"
	"github.com/registrum/registrum/model"
)

func ip(v int) *int      { return &v }
func i64(v int64) *int64 { return &v }

func field(f model.Field) *model.Field {
	if f.APIName == "" {
		f.APIName = "v"
	}
	return &f
}

func decodeWire(t *testing.T, raw string) any {
	t.Helper()
	v, err := strictjson.Decode([]byte(raw))
	if err != nil {
		t.Fatal(err)
	}
	return v
}

func TestDecodeChecksEveryTypeAtItsEdges(t *testing.T) {
	fields := map[string]*model.Field{
		"str":    field(model.Field{Type: model.TypeString, MinLength: ip(2), MaxLength: ip(3), Pattern: `^[a-zé]+$`}),
		"int":    field(model.Field{Type: model.TypeInteger, Minimum: i64(-1), Maximum: i64(10)}),
		"bigint": field(model.Field{Type: model.TypeInteger}),
		"dec":    field(model.Field{Type: model.TypeDecimal, Precision: ip(5), Scale: ip(2)}),
		"bool":   field(model.Field{Type: model.TypeBoolean}),
		"date":   field(model.Field{Type: model.TypeDate}),
		"ts":     field(model.Field{Type: model.TypeTimestamp}),
		"uuid":   field(model.Field{Type: model.TypeUUID}),
		"code":   field(model.Field{Type: model.TypeCode, Values: []string{"a", "b"}}),
		"pt":     field(model.Field{Type: model.TypeCRS84Point}),
		"req":    field(model.Field{Type: model.TypeString, Required: true}),
		"st":     field(model.Field{Type: model.TypeStructured, Schema: json.RawMessage(`{"type":"object","properties":{"k":{"type":"integer"}},"required":["k"],"additionalProperties":false}`)}),
	}
	pkg := &model.Package{Entities: []*model.Entity{{ID: "e"}}}
	for _, f := range fields {
		pkg.Entities[0].Fields = append(pkg.Entities[0].Fields, f)
	}
	c, err := NewCodec(pkg)
	if err != nil {
		t.Fatal(err)
	}
	cases := []struct {
		field string
		wire  string
		want  any // nil with ok=false means refused
		ok    bool
	}{
		{"str", `"ab"`, "ab", true},
		{"str", `"abé"`, "abé", true}, // three characters, four bytes
		{"str", `"a"`, nil, false},
		{"str", `"abcd"`, nil, false},
		{"str", `"AB"`, nil, false},
		{"str", `12`, nil, false},
		{"str", `null`, nil, true},
		{"req", `null`, nil, false},
		{"int", `10`, int64(10), true},
		{"int", `11`, nil, false},
		{"int", `-1`, int64(-1), true},
		{"int", `-2`, nil, false},
		{"int", `1.5`, nil, false},
		{"int", `"1"`, nil, false},
		{"bigint", `9223372036854775807`, int64(9223372036854775807), true},
		{"bigint", `9223372036854775808`, nil, false},
		{"dec", `"123.4"`, "123.40", true},
		{"dec", `"999.99"`, "999.99", true},
		{"dec", `"1000.00"`, nil, false},
		{"dec", `"1.234"`, nil, false},
		{"dec", `1.5`, nil, false},
		{"dec", `"01.5"`, nil, false},
		{"bool", `true`, true, true},
		{"bool", `"true"`, nil, false},
		{"date", `"2024-02-29"`, "2024-02-29", true},
		{"date", `"2023-02-29"`, nil, false},
		{"date", `"2023-2-1"`, nil, false},
		{"ts", `"2026-11-22T10:00:00+02:00"`, time.Date(2026, 11, 22, 8, 0, 0, 0, time.UTC), true},
		{"ts", `"2026-11-22T10:00:00"`, nil, false},
		{"ts", `"2026-11-22T10:00:00.000000001Z"`, nil, false},
		{"uuid", `"0b8f7c2e-5d1a-4c3b-9a7e-2f1d3c4b5a69"`, "0b8f7c2e-5d1a-4c3b-9a7e-2f1d3c4b5a69", true},
		{"uuid", `"0B8F7C2E-5D1A-4C3B-9A7E-2F1D3C4B5A69"`, nil, false},
		{"code", `"a"`, "a", true},
		{"code", `"c"`, nil, false},
		{"pt", `{"type":"Point","coordinates":[24.94,60.17]}`, json.RawMessage(`{"coordinates":[24.94,60.17],"type":"Point"}`), true},
		{"pt", `{"type":"Point","coordinates":[181,0]}`, nil, false},
		{"pt", `{"type":"Point","coordinates":[0,0,0]}`, nil, false},
		{"pt", `{"type":"LineString","coordinates":[0,0]}`, nil, false},
		{"st", `{"k":1}`, json.RawMessage(`{"k":1}`), true},
		{"st", `{"k":"x"}`, nil, false},
		{"st", `{"k":1,"extra":true}`, nil, false},
	}
	for _, tc := range cases {
		got, err := c.Decode(fields[tc.field], decodeWire(t, tc.wire))
		if !tc.ok {
			var fault *Fault
			if !errors.As(err, &fault) {
				t.Errorf("%s %s: err = %v, want a Fault", tc.field, tc.wire, err)
			}
			continue
		}
		if err != nil {
			t.Errorf("%s %s: %v", tc.field, tc.wire, err)
			continue
		}
		switch w := tc.want.(type) {
		case json.RawMessage:
			if string(got.(json.RawMessage)) != string(w) {
				t.Errorf("%s %s = %s, want %s", tc.field, tc.wire, got, w)
			}
		case time.Time:
			if !w.Equal(got.(time.Time)) {
				t.Errorf("%s %s = %v, want %v", tc.field, tc.wire, got, w)
			}
		default:
			if got != tc.want {
				t.Errorf("%s %s = %#v, want %#v", tc.field, tc.wire, got, tc.want)
			}
		}
	}
}

func TestEncodeWritesTimestampsInUTC(t *testing.T) {
	f := field(model.Field{Type: model.TypeTimestamp})
	got := Encode(f, time.Date(2026, 1, 2, 3, 4, 5, 600000, time.FixedZone("x", 3600)))
	if got != "2026-01-02T02:04:05.0006Z" {
		t.Fatalf("got %v", got)
	}
}

func TestIsUUID(t *testing.T) {
	for s, want := range map[string]bool{
		"3f2b8c1e-4d5a-4b6c-8d7e-9f0a1b2c3d4e":  true,
		"00000000-0000-0000-0000-000000000000":  true,
		"3F2B8C1E-4D5A-4B6C-8D7E-9F0A1B2C3D4E":  false, // lowercase form only
		"3f2b8c1e4d5a-4b6c-8d7e-9f0a1b2c3d4e-":  false,
		"3f2b8c1e-4d5a-4b6c-8d7e-9f0a1b2c3d4":   false,
		"3f2b8c1e-4d5a-4b6c-8d7e-9f0a1b2c3d4e0": false,
		"3f2b8c1e-4d5a-4b6c-8d7e-9f0a1b2c3d4g":  false,
		"{3f2b8c1e-4d5a-4b6c-8d7e-9f0a1b2c3d4}": false,
		"":                                      false,
	} {
		if got := IsUUID(s); got != want {
			t.Errorf("IsUUID(%q) = %v, want %v", s, got, want)
		}
	}
}

// TestLiteralHasTheVerdictOfDecode: a literal (what the compiler checks) is
// accepted exactly when the codec accepts the same value in a write, and is
// returned in the form the host answers it.
func TestLiteralHasTheVerdictOfDecode(t *testing.T) {
	cases := []struct {
		f    *model.Field
		wire string
		want any // nil: refused
	}{
		{field(model.Field{ID: "d", Type: model.TypeDate}), `"2026-02-31"`, nil},
		{field(model.Field{ID: "d", Type: model.TypeDate}), `"2026-02-28"`, "2026-02-28"},
		{field(model.Field{ID: "t", Type: model.TypeTimestamp}), `"2026-01-02T05:04:05+02:00"`, "2026-01-02T03:04:05Z"},
		{field(model.Field{ID: "t", Type: model.TypeTimestamp}), `"2026-01-02T03:04:05.123456789Z"`, nil},
		{field(model.Field{ID: "s", Type: model.TypeString, MaxLength: ip(8)}), `"a\u0000b"`, nil},
		{field(model.Field{ID: "s", Type: model.TypeString, MaxLength: ip(8), Pattern: `^[A-Z]{2}$`}), `"abc"`, nil},
		{field(model.Field{ID: "s", Type: model.TypeString, MaxLength: ip(8), Pattern: `^[A-Z]{2}$`}), `"AB"`, "AB"},
		{field(model.Field{ID: "n", Type: model.TypeDecimal, Precision: ip(6), Scale: ip(2)}), `"12.5"`, "12.50"},
		{field(model.Field{ID: "i", Type: model.TypeInteger, Maximum: i64(10)}), `7`, json.Number("7")},
		{field(model.Field{ID: "i", Type: model.TypeInteger, Maximum: i64(10)}), `11`, nil},
	}
	for _, tc := range cases {
		c, err := NewCodec(&model.Package{Entities: []*model.Entity{{ID: "e", Fields: []*model.Field{tc.f}}}})
		if err != nil {
			t.Fatal(err)
		}
		v := decodeWire(t, tc.wire)
		_, decodeErr := c.Decode(tc.f, v)
		got, err := Literal(tc.f, v)
		if (err == nil) != (decodeErr == nil) {
			t.Errorf("%s %s: Literal says %v, a write says %v", tc.f.Type, tc.wire, err, decodeErr)
		}
		if (err == nil) != (tc.want != nil) || (err == nil && got != tc.want) {
			t.Errorf("%s %s: Literal = %v, %v; want %v", tc.f.Type, tc.wire, got, err, tc.want)
		}
	}
	if _, err := Literal(field(model.Field{ID: "s", Type: model.TypeString, Pattern: "("}), "x"); err == nil {
		t.Error("a broken pattern passed")
	}
}

// TestCheckStoredJudgesRowValuesAsWrites: a value as the store reads it
// from a row passes CheckStored exactly when its wire form would pass a
// write under the field's current metadata (a narrowed bound, a code
// dropped from the list, a schema that no longer admits it).
func TestCheckStoredJudgesRowValuesAsWrites(t *testing.T) {
	cases := []struct {
		f      *model.Field
		stored any
		ok     bool
	}{
		{field(model.Field{ID: "i", Type: model.TypeInteger, Maximum: i64(10)}), int64(10), true},
		{field(model.Field{ID: "i", Type: model.TypeInteger, Maximum: i64(10)}), int64(11), false},
		{field(model.Field{ID: "i", Type: model.TypeInteger, Minimum: i64(0)}), int32(-1), false},
		{field(model.Field{ID: "c", Type: model.TypeCode, Values: []string{"north"}}), "north", true},
		{field(model.Field{ID: "c", Type: model.TypeCode, Values: []string{"north"}}), "west", false},
		{field(model.Field{ID: "s", Type: model.TypeString, Pattern: `^[A-Z]+$`}), "ab", false},
		{field(model.Field{ID: "t", Type: model.TypeTimestamp}), time.Date(2026, 1, 2, 3, 4, 5, 6000, time.UTC), true},
		{field(model.Field{ID: "d", Type: model.TypeDecimal, Precision: ip(6), Scale: ip(2)}), "12.50", true},
		{field(model.Field{ID: "d", Type: model.TypeDecimal, Precision: ip(3), Scale: ip(2)}), "12.50", false},
		{field(model.Field{ID: "st", Type: model.TypeStructured, Schema: json.RawMessage(`{"type":"object","required":["k"]}`)}), json.RawMessage(`{"k":1}`), true},
		{field(model.Field{ID: "st", Type: model.TypeStructured, Schema: json.RawMessage(`{"type":"object","required":["k"]}`)}), json.RawMessage(`{"j":1}`), false},
		{field(model.Field{ID: "st", Type: model.TypeStructured}), json.RawMessage(`{"k":`), false},
		{field(model.Field{ID: "p", Type: model.TypeCRS84Point}), json.RawMessage(`{"type":"Point","coordinates":[1.5,2]}`), true},
		{field(model.Field{ID: "p", Type: model.TypeCRS84Point}), json.RawMessage(`{"type":"Point","coordinates":[181,2]}`), false},
	}
	for _, tc := range cases {
		c, err := NewCodec(&model.Package{Entities: []*model.Entity{{ID: "e", Fields: []*model.Field{tc.f}}}})
		if err != nil {
			t.Fatal(err)
		}
		if err := c.CheckStored(tc.f, tc.stored); (err == nil) != tc.ok {
			t.Errorf("%s %v: CheckStored = %v, want ok %v", tc.f.Type, tc.stored, err, tc.ok)
		}
	}
}
