package project

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/registrum/registrum/internal/strictjson"
	"github.com/registrum/registrum/model"
	"github.com/registrum/registrum/model/values"
)

// literalProject is a project in which one literal, VALUE, of field v
// (declared as FIELD) is written at every place the compiler checks
// literals: a check constraint, a hook condition, a value an effect sets and
// an action precondition. Without LITERALS it declares the field alone.
const literalProject = `format: registrum.project/v1
registry: {id: parcels, version: 1.0.0, language: en, canonicalBaseIri: "https://parcels.example.test"}
entities:
  - id: parcel
    route: parcels
    dataset: land
    fields:
      - {id: parcel-code, type: string, maxLength: 32, required: true}
      - FIELD
LITERALS
profiles:
  - id: clerk
    default: true
    requiredScopes: ["parcels:write"]
    grants:
      - entity: parcel
        operations: [create, get, list, patch]
        readableFields: [parcel-code, v]
        writableFields: [parcel-code, v]
        rowBoundaries: unrestricted
`

const literalSites = `    constraints:
      - {kind: check, field: v, operator: eq, value: VALUE}
    hooks:
      - id: v-set
        phase: after
        trigger: patched
        projection: [parcel-code]
        when: {kind: fields, changed: [v], afterEquals: {v: VALUE}}
actions:
  - id: set-v
    inputs:
      - {id: parcel, type: reference, target: parcel, required: true}
    effects:
      - id: set
        operation: patch
        target: {fromField: parcel}
        set: {v: {value: VALUE}}
    preconditions:
      - {effect: set, field: v, equals: VALUE}`

func literalDoc(field, value string) string {
	doc := strings.Replace(literalProject, "FIELD", field, 1)
	if value == "" {
		return strings.Replace(doc, "LITERALS\n", "", 1)
	}
	return strings.Replace(doc, "LITERALS", strings.ReplaceAll(literalSites, "VALUE", value), 1)
}

// TestLiteralsGetTheVerdictOfAWrite holds the compiler and the runtime to
// one value checker (model/values): a literal compiles exactly when a write
// of the same value is accepted. Each case once disagreed: an impossible
// date compiled but no write took it; a timestamp with an offset was refused
// by the compiler only; nanosecond timestamps and NUL in strings compiled
// but no write took them; the compiler never checked pattern.
func TestLiteralsGetTheVerdictOfAWrite(t *testing.T) {
	const (
		date   = "{id: v, type: date}"
		ts     = "{id: v, type: timestamp}"
		str    = "{id: v, type: string, maxLength: 8}"
		coded  = `{id: v, type: string, maxLength: 8, pattern: "^[A-Z]{2}$"}`
		amount = "{id: v, type: decimal, precision: 6, scale: 2}"
	)
	cases := []struct {
		name, field, value string
		ok                 bool
		answered           any // the literal as the package keeps it, when ok
	}{
		{"impossible date", date, `"2026-02-31"`, false, nil},
		{"real date", date, `"2026-02-28"`, true, "2026-02-28"},
		{"timestamp with an offset", ts, `"2026-01-02T05:04:05+02:00"`, true, "2026-01-02T03:04:05Z"},
		{"nanosecond timestamp", ts, `"2026-01-02T03:04:05.123456789Z"`, false, nil},
		{"microsecond timestamp", ts, `"2026-01-02T03:04:05.123456Z"`, true, "2026-01-02T03:04:05.123456Z"},
		{"NUL in a string", str, `"a\u0000b"`, false, nil},
		{"string", str, `"ab"`, true, "ab"},
		{"pattern not matched", coded, `"abc"`, false, nil},
		{"pattern matched", coded, `"AB"`, true, "AB"},
		{"decimal answered with its scale", amount, `"12.5"`, true, "12.50"},
		{"decimal beyond its scale", amount, `"12.505"`, false, nil},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			// The runtime: a write of the value through the codec.
			plain, fs := compileText(t, literalDoc(tc.field, ""), opts(false))
			if fs != nil {
				t.Fatalf("field alone: %v", fs)
			}
			codec, err := values.NewCodec(plain.Package)
			if err != nil {
				t.Fatal(err)
			}
			wire, err := strictjson.Decode([]byte(tc.value))
			if err != nil {
				t.Fatal(err)
			}
			_, writeErr := codec.Decode(plain.Package.Entities[0].Field("v"), wire)

			// The compiler: the same value as a literal at every place.
			res, fs := compileText(t, literalDoc(tc.field, tc.value), opts(false))
			if (writeErr == nil) != (fs == nil) {
				t.Fatalf("a write says %v; the compiler says %v", writeErr, fs)
			}
			if (fs == nil) != tc.ok {
				t.Fatalf("verdict %v, want %v (write: %v; compile: %v)", fs == nil, tc.ok, writeErr, fs)
			}
			if !tc.ok {
				if len(fs) != 4 {
					t.Fatalf("want one finding at each of the 4 literals, got %v", fs)
				}
				return
			}
			checkKeptLiterals(t, res.Package, tc.answered)
		})
	}
}

// checkKeptLiterals asserts that every literal of the package is kept in the
// form the host answers, want.
func checkKeptLiterals(t *testing.T, p *model.Package, want any) {
	t.Helper()
	e := p.Entities[0]
	var con *model.Constraint
	for _, c := range e.Constraints {
		if c.Kind == model.ConstraintCheck {
			con = c
		}
	}
	a := p.Actions[0]
	got := map[string]any{
		"constraint":   con.Value,
		"hook":         e.Hooks[0].When.AfterEquals[0].Value,
		"effect set":   a.Effects[0].Set[0].Value,
		"precondition": a.Preconditions[0].Equals,
	}
	for site, v := range got {
		if b, _ := json.Marshal(v); string(b) != mustJSON(t, want) {
			t.Errorf("%s keeps %s, want %s", site, b, mustJSON(t, want))
		}
	}
}

func mustJSON(t *testing.T, v any) string {
	t.Helper()
	b, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

func TestCheckValueRefusesNullAndUncomparableTypes(t *testing.T) {
	if _, err := CheckValue(&model.Field{ID: "v", APIName: "v", Type: model.TypeDate}, nil); err == nil {
		t.Error("null accepted as a literal")
	}
	if _, err := CheckValue(&model.Field{ID: "p", APIName: "p", Type: model.TypeCRS84Point}, map[string]any{"type": "Point"}); err == nil {
		t.Error("a point literal accepted")
	}
}
