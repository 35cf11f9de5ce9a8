package contract_test

import (
	"bytes"
	"encoding/json"
	"reflect"
	"strings"
	"testing"

	"github.com/registrum/registrum/plugins/contract"
)

func plan(t *testing.T, doc string) contract.PlanResult {
	t.Helper()
	var p contract.PlanResult
	dec := json.NewDecoder(strings.NewReader(doc))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&p); err != nil {
		t.Fatalf("%s: %v", doc, err)
	}
	return p
}

func TestPlanValidate(t *testing.T) {
	writes := []contract.Write{
		{Entity: "guardian", Operation: "create", Fields: []string{"name"}},
		{Entity: "child", Operation: "patch", Fields: []string{"guardian_id", "phone"}},
	}
	valid := []string{
		`{"refusal":{"kind":"child_missing"}}`,
		`{"effects":[{"id":"g","operation":"create","target":{"entity":"guardian"},"set":{"name":{"value":null}}},{"id":"c","operation":"patch","target":{"entity":"child","fromEffect":"g"},"set":{"guardian_id":{"fromEffect":"g"}},"clear":["phone"]}]}`,
		`{"effects":[{"id":"c","operation":"patch","target":{"entity":"child","fromField":"child_id"},"set":{"phone":{"fromField":"phone"}}}]}`,
	}
	for _, doc := range valid {
		if err := plan(t, doc).Validate(writes); err != nil {
			t.Errorf("%s: %v", doc, err)
		}
	}
	for doc, want := range map[string]string{
		`{}`: "neither effects nor refusal",
		`{"refusal":{"kind":"x"},"effects":[{"id":"c","operation":"patch","target":{"entity":"child","fromField":"f"},"clear":["phone"]}]}`: "both",
		`{"refusal":{"kind":"has space"}}`:    "refusal.kind",
		`{"refusal":{"kind":"x","code":"y"}}`: "only kind",
		`{"effects":[{"id":"","operation":"create","target":{"entity":"guardian"},"set":{"name":{"value":1}}}]}`:                                                                                                        "effects[0].id",
		`{"effects":[{"id":"a","operation":"delete","target":{"entity":"guardian"},"clear":["name"]}]}`:                                                                                                                 "effects[0].operation",
		`{"effects":[{"id":"a","operation":"create","target":{"entity":"guardian","fromField":"x"},"clear":["name"]}]}`:                                                                                                 "a create names only its entity",
		`{"effects":[{"id":"a","operation":"patch","target":{"entity":"child"},"clear":["phone"]}]}`:                                                                                                                    "exactly one of fromField or fromEffect",
		`{"effects":[{"id":"a","operation":"patch","target":{"entity":"child","fromField":"x","fromEffect":"y"},"clear":["phone"]}]}`:                                                                                   "exactly one of fromField or fromEffect",
		`{"effects":[{"id":"a","operation":"patch","target":{"entity":"child","fromEffect":"later"},"clear":["phone"]},{"id":"later","operation":"create","target":{"entity":"guardian"},"set":{"name":{"value":1}}}]}`: "not an earlier create",
		`{"effects":[{"id":"a","operation":"patch","target":{"entity":"child","fromField":"x"}}]}`:                                                                                                                      "sets and clears nothing",
		`{"effects":[{"id":"a","operation":"patch","target":{"entity":"child","fromField":"x"},"set":{"phone":{}}}]}`:                                                                                                   "exactly one of value, fromField or fromEffect",
		`{"effects":[{"id":"a","operation":"patch","target":{"entity":"child","fromField":"x"},"set":{"phone":{"value":1,"fromField":"p"}}}]}`:                                                                          "exactly one of value, fromField or fromEffect",
		`{"effects":[{"id":"a","operation":"patch","target":{"entity":"child","fromField":"x"},"set":{"phone":{"fromEffect":"zz"}}}]}`:                                                                                  "not an earlier create",
		`{"effects":[{"id":"a","operation":"patch","target":{"entity":"child","fromField":"x"},"set":{"phone":{"value":1}},"clear":["phone"]}]}`:                                                                        "also set",
		`{"effects":[{"id":"a","operation":"patch","target":{"entity":"child","fromField":"x"},"clear":["phone","phone"]}]}`:                                                                                            "cleared twice",
		`{"effects":[{"id":"a","operation":"patch","target":{"entity":"child","fromField":"x"},"clear":["address"]}]}`:                                                                                                  "outside the planner's declared writes",
		`{"effects":[{"id":"a","operation":"create","target":{"entity":"child"},"set":{"phone":{"value":1}}}]}`:                                                                                                         "outside the planner's declared writes",
		`{"effects":[{"id":"a","operation":"patch","target":{"entity":"child","fromField":"x"},"clear":["phone"]},{"id":"a","operation":"patch","target":{"entity":"child","fromField":"x"},"clear":["phone"]}]}`:       "duplicate effect id",
	} {
		err := plan(t, doc).Validate(writes)
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("%s: want error with %q, got %v", doc, want, err)
		}
	}
	// Without declared writes only the shape is checked.
	if err := plan(t, `{"effects":[{"id":"a","operation":"patch","target":{"entity":"any","fromField":"x"},"clear":["f"]}]}`).Validate(nil); err != nil {
		t.Fatal(err)
	}
}

func TestHookAndActionValidate(t *testing.T) {
	for r, ok := range map[contract.HookResult]bool{
		{Outcome: "acknowledged"}:              true,
		{Outcome: "retry", Kind: "busy"}:       true,
		{Outcome: "retry"}:                     false,
		{Outcome: "acknowledged", Kind: "x"}:   false,
		{Outcome: "done"}:                      false,
		{Outcome: "retry", Kind: "free text!"}: false,
	} {
		if err := r.Validate(); (err == nil) != ok {
			t.Errorf("%+v: %v", r, err)
		}
	}
	declared := []contract.DeclaredActionWrite{{ID: "w", Fields: []string{"a"}}}
	refusals := []string{"no"}
	for doc, want := range map[string]string{
		`{"writes":[{"id":"w","set":{"a":1}}]}`:                          "",
		`{"refusal":{"code":"no","field":"a"}}`:                          "",
		`{"refusal":{"code":"other"}}`:                                   "not a declared refusal",
		`{"refusal":{"kind":"no"}}`:                                      "has a code, not a kind",
		`{"writes":[{"id":"x","set":{"a":1}}]}`:                          "not a declared write",
		`{"writes":[{"id":"w","set":{"b":1}}]}`:                          "not a declared field",
		`{"writes":[{"id":"w","set":{}}]}`:                               "sets nothing",
		`{"writes":[{"id":"w","set":{"a":1}},{"id":"w","set":{"a":2}}]}`: "given twice",
		`{}`: "neither writes nor refusal",
	} {
		var r contract.ActionResult
		if err := json.Unmarshal([]byte(doc), &r); err != nil {
			t.Fatal(err)
		}
		err := r.Validate(declared, refusals)
		if want == "" && err != nil || want != "" && (err == nil || !strings.Contains(err.Error(), want)) {
			t.Errorf("%s: want %q, got %v", doc, want, err)
		}
	}
}

// TestAppendJSONMatchesEncodingJSON checks the reflection-free writers give
// the same documents encoding/json does.
func TestAppendJSONMatchesEncodingJSON(t *testing.T) {
	p := contract.PlanResult{Effects: []contract.Effect{{
		ID: "a", Operation: "patch", Target: contract.Target{Entity: "e", FromField: "f"},
		Set:   map[string]contract.FieldSource{"z": {Value: json.RawMessage(`"\u00e9<>&"`)}, "b": {FromField: "x"}, "c": {FromEffect: "y"}, "n": {Value: json.RawMessage("null")}},
		Clear: []string{"q"},
	}}}
	for _, v := range []interface {
		AppendJSON([]byte) []byte
	}{
		p,
		contract.PlanResult{Refusal: &contract.Refusal{Kind: "k"}},
		contract.HookResult{Outcome: "retry", Kind: "k"},
		contract.ActionResult{Writes: []contract.ActionWrite{{ID: "w", Set: map[string]json.RawMessage{"b": json.RawMessage("1"), "a": json.RawMessage(`[true]`)}}}},
		contract.ActionResult{Refusal: &contract.Refusal{Code: "c", Field: "f"}},
	} {
		got := v.AppendJSON(nil)
		want, err := json.Marshal(v)
		if err != nil {
			t.Fatal(err)
		}
		if !jsonEqual(t, got, want) {
			t.Errorf("AppendJSON %s\n encoding/json %s", got, want)
		}
	}
}

func jsonEqual(t *testing.T, a, b []byte) bool {
	t.Helper()
	decode := func(doc []byte) any {
		dec := json.NewDecoder(bytes.NewReader(doc))
		dec.UseNumber() // exact numbers: 1e999 is JSON but not a float64
		var v any
		if err := dec.Decode(&v); err != nil {
			t.Fatalf("%s: %v", doc, err)
		}
		return v
	}
	return reflect.DeepEqual(decode(a), decode(b))
}

func TestParseValue(t *testing.T) {
	v, err := contract.ParseValue([]byte(` {"a":[1,-2.5e3,"x\u00e9\ud83d\ude00\n",true,false,null],"b":{}} `))
	if err != nil {
		t.Fatal(err)
	}
	want := map[string]any{"a": []any{json.Number("1"), json.Number("-2.5e3"), "xé😀\n", true, false, nil}, "b": map[string]any{}}
	if !reflect.DeepEqual(v, want) {
		t.Fatalf("%#v", v)
	}
	deep := strings.Repeat("[", contract.MaxDepth) + strings.Repeat("]", contract.MaxDepth)
	if _, err := contract.ParseValue([]byte(deep)); err != nil {
		t.Fatalf("depth %d: %v", contract.MaxDepth, err)
	}
	for _, bad := range []string{"", "{", `{"a"}`, `{"a":1,}`, "[1,]", "01", "1.", "-", "1e", `"\x"`, "\"a\x01\"", `"\ud83d"x`, "tru", "nul", "{} {}", "\"\xff\"", "[" + deep + "]"} {
		if _, err := contract.ParseValue([]byte(bad)); err == nil {
			t.Errorf("%q parsed", bad)
		}
	}
}

// FuzzParseValue checks ParseValue accepts exactly what encoding/json accepts
// (within the depth bound) and that AppendValue round-trips what it parsed.
func FuzzParseValue(f *testing.F) {
	for _, s := range []string{`{"a":[1,2.5,"x",null,true]}`, `"\u00e9"`, `-0.1e-7`, `[[]]`, `{"a":{"b":{}}}`} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		v, err := contract.ParseValue(b)
		validUTF8 := json.Valid(b) && bytes.Equal(b, bytes.ToValidUTF8(b, nil))
		if err != nil {
			if validUTF8 && !strings.Contains(err.Error(), "nesting too deep") && !strings.Contains(err.Error(), "UTF-8") {
				t.Fatalf("valid JSON %q refused: %v", b, err)
			}
			return
		}
		if !json.Valid(b) {
			t.Fatalf("invalid JSON %q accepted", b)
		}
		out, err := contract.AppendValue(nil, v)
		if err != nil {
			t.Fatal(err)
		}
		if !jsonEqual(t, out, b) {
			t.Fatalf("round trip %q -> %q", b, out)
		}
	})
}

// FuzzAppendString checks AppendString against encoding/json on any string.
func FuzzAppendString(f *testing.F) {
	for _, s := range []string{"plain ascii text longer than 8", "tab\there", "quote\"and\\back", "é😀", "\xff\xfe bad", "0123456\x1f89"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		got := contract.AppendString(nil, s)
		var back string
		if err := json.Unmarshal(got, &back); err != nil {
			t.Fatalf("%q encoded to invalid JSON %s: %v", s, got, err)
		}
		want := strings.ToValidUTF8(s, "\ufffd")
		if utf8Equal := back == want; !utf8Equal {
			// encoding/json replaces each invalid byte; so does AppendString.
			var ref string
			_ = json.Unmarshal(mustMarshal(t, s), &ref)
			if back != ref {
				t.Fatalf("%q round-tripped to %q, encoding/json gives %q", s, back, ref)
			}
		}
	})
}

func mustMarshal(t *testing.T, v any) []byte {
	b, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// TestParseObjectMember checks the input reader of guests: one member name
// holding an object, nothing else.
func TestParseObjectMember(t *testing.T) {
	for _, tc := range []struct {
		in   string
		want string // the inner object re-encoded, or "error"
	}{
		{`{"request":{"a":"x","b":[1,{"c":null}]}}`, `{"a":"x","b":[1,{"c":null}]}`},
		{` { "request" : { } } `, `{}`},
		{`{"request":{"a":1},"request":{"a":2}}`, `{"a":2}`},
		{`{}`, "error"},
		{`{"request":1}`, "error"},
		{`{"request":{},"other":{}}`, "error"},
		{`{"other":{}}`, "error"},
		{`{"request":{}} x`, "error"},
		{`{"request":{}`, "error"},
		{`{"request" {}}`, "error"},
		{`[]`, "error"},
		{``, "error"},
	} {
		m, err := contract.ParseObjectMember([]byte(tc.in), "request")
		got := "error"
		if err == nil {
			b, aerr := contract.AppendValue(nil, m)
			if aerr != nil {
				t.Fatal(aerr)
			}
			got = string(b)
		}
		if got != tc.want {
			t.Errorf("ParseObjectMember(%s) = %s (%v), want %s", tc.in, got, err, tc.want)
		}
	}
}
