package plugins

import (
	"bytes"
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"slices"
	"strings"
	"testing"

	"github.com/registrum/registrum/internal/canonjson"
	"github.com/registrum/registrum/plugins/contract"
)

var (
	outputNames  = []string{"a", "child", "guardian_id", "new-guardian", "x.y", "Z9", "case_notes", "b"}
	outputValues = []string{`null`, `true`, `1.0`, `1e2`, `-0`, `12345678901234567890`, `"é\u00e9 <&> \b\f"`,
		`"\ud83d\ude00"`, `{"z":1,"a":[1,2,{"y":null,"b":"x"}]}`, `[ ]`, `"plain"`, `0.1`, `{"é":1,"e":2,"\u20ac":3}`}
)

func pickName(r *rand.Rand) string { return outputNames[r.IntN(len(outputNames))] }

// randomPlanDoc writes a plan document the way a module might: members in
// any order, spaces, values in non-canonical forms.
func randomPlanDoc(r *rand.Rand) string {
	if r.IntN(8) == 0 {
		return fmt.Sprintf(` { "refusal" : { "kind" : %q } } `, pickName(r))
	}
	var effects []string
	for i := range 1 + r.IntN(3) {
		var members []string
		members = append(members, fmt.Sprintf(`"id":"e%d"`, i))
		if i == 0 || r.IntN(2) == 0 {
			members = append(members, `"operation":"create"`, fmt.Sprintf(`"target":{"entity":%q}`, pickName(r)))
		} else if r.IntN(2) == 0 {
			members = append(members, `"operation":"patch"`, fmt.Sprintf(`"target":{"fromField":%q,"entity":%q}`, pickName(r), pickName(r)))
		} else {
			members = append(members, `"operation":"patch"`, fmt.Sprintf(`"target":{"fromEffect":"e0","entity":%q}`, pickName(r)))
		}
		var set []string
		fields := slices.Clone(outputNames)
		r.Shuffle(len(fields), func(i, j int) { fields[i], fields[j] = fields[j], fields[i] })
		for _, field := range fields[:r.IntN(4)] {
			switch r.IntN(3) {
			case 0:
				set = append(set, fmt.Sprintf(`%q:{"value": %s}`, field, outputValues[r.IntN(len(outputValues))]))
			case 1:
				set = append(set, fmt.Sprintf(`%q:{"fromField":%q}`, field, pickName(r)))
			default:
				set = append(set, fmt.Sprintf(`%q:{"fromEffect":"e0"}`, field))
			}
		}
		if len(set) > 0 {
			members = append(members, `"set":{`+strings.Join(set, ",")+`}`)
		}
		if len(set) == 0 || r.IntN(2) == 0 {
			members = append(members, fmt.Sprintf(`"clear":[%q]`, pickName(r)))
		}
		r.Shuffle(len(members), func(i, j int) { members[i], members[j] = members[j], members[i] })
		effects = append(effects, "{"+strings.Join(members, ", ")+"}")
	}
	return `{"effects":[` + strings.Join(effects, ",") + `]}`
}

// decodeWithEncodingJSON is the decoding the runtime did before.
func decodeWithEncodingJSON(raw []byte, out any) error {
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.DisallowUnknownFields()
	if err := dec.Decode(out); err != nil {
		return err
	}
	if dec.More() {
		return fmt.Errorf("trailing data")
	}
	return nil
}

func TestOutputDecodingAndCanonicalFormMatchTheGeneralPath(t *testing.T) {
	r := rand.New(rand.NewPCG(3, 4))
	for range 3000 {
		doc := []byte(randomPlanDoc(r))
		var fast, general contract.PlanResult
		if err := decodeOutput(doc, &fast); err != nil {
			t.Fatalf("decodeOutput(%s): %v", doc, err)
		}
		if err := decodeWithEncodingJSON(doc, &general); err != nil {
			t.Fatalf("encoding/json(%s): %v", doc, err)
		}
		want, err := canonjson.Marshal(&general)
		if err != nil {
			t.Fatal(err)
		}
		got, err := canonicalOutput(&fast)
		if err != nil {
			t.Fatal(err)
		}
		if !bytes.Equal(got, want) {
			t.Fatalf("document %s\n got %s\nwant %s", doc, got, want)
		}
	}
}

// sameAsGeneralPath checks that decoding doc and writing it canonically
// gives what encoding/json and the general canonicaliser give.
func sameAsGeneralPath[R any](t *testing.T, doc string) {
	t.Helper()
	var fast, general R
	if err := decodeOutput([]byte(doc), &fast); err != nil {
		t.Fatalf("decodeOutput(%s): %v", doc, err)
	}
	if err := decodeWithEncodingJSON([]byte(doc), &general); err != nil {
		t.Fatalf("encoding/json(%s): %v", doc, err)
	}
	got, err := canonicalOutput(&fast)
	if err != nil {
		t.Fatal(err)
	}
	want, _ := canonjson.Marshal(&general)
	if !bytes.Equal(got, want) {
		t.Fatalf("%s: got %s, want %s", doc, got, want)
	}
}

func TestOutputHookAndActionMatchTheGeneralPath(t *testing.T) {
	for _, doc := range []string{
		`{"outcome":"acknowledged"}`, `{"kind":"busy","outcome":"retry"}`, ` { "outcome" : "retry" , "kind" : "x.y" } `,
	} {
		sameAsGeneralPath[contract.HookResult](t, doc)
	}
	for _, doc := range []string{
		`{"writes":[{"id":"w","set":{"b":1.50,"a":{"y":2,"x":[true,null]}}},{"set":{"n":"é"},"id":"v"}]}`,
		`{"refusal":{"field":"amount","code":"too_big"}}`,
		`{"writes":[{"id":"w","set":null}]}`,
	} {
		sameAsGeneralPath[contract.ActionResult](t, doc)
	}
}

func TestOutputDecodingRefusesWhatItShould(t *testing.T) {
	for _, doc := range []string{
		``, `[]`, `"x"`, `{"effects":[]} x`, `{"effects":[],}`,
		`{"effect":[]}`, `{"Effects":[]}`, `{"effects":{}}`, `{"effects":[1]}`,
		`{"effects":[{"id":1}]}`, `{"effects":[{"id":"e","extra":true}]}`,
		`{"effects":[{"id":"e","target":{"entity":"a","other":"b"}}]}`, `{"effects":[{"id":"e","target":"a"}]}`,
		`{"effects":[{"id":"e","set":[]}]}`, `{"effects":[{"id":"e","set":{"f":{"value":1,"other":2}}}]}`,
		`{"effects":[{"id":"e","set":{"f":"v"}}]}`, `{"effects":[{"id":"e","clear":"f"}]}`, `{"effects":[{"id":"e","clear":[1]}]}`,
		`{"refusal":"no"}`, `{"refusal":{"kind":"k","reason":"free text"}}`, `{"effects":[{"id":"e"}]} }`,
		`{"effects":[{"id":"\x"}]}`, `{"effects":[],"effects":[]}`, `{"effects":[{"id":"a","id":"b"}]}`,
		`{"effects":[{"id":"e","set":{"f":{"value":1},"f":{"value":2}}}]}`, `{"effects":[{"id":"e","set":{"f":{"value":1,"value":2}}}]}`,
		`{"refusal":{"kind":"a","kind":"b"}}`, "{\"effects\":[{\"id\":\"\xff\"}]}", "{\"effects\":[{\"id\":\"e\",\"set\":{\"f\":{\"value\":\"\x01\"}}}]}",
		strings.Repeat("[", 100) + strings.Repeat("]", 100),
	} {
		var out contract.PlanResult
		if err := decodeOutput([]byte(doc), &out); err == nil {
			t.Errorf("decodeOutput accepted %q", doc)
		}
	}
	var hook contract.HookResult
	if err := decodeOutput([]byte(`{"outcome":"retry","why":"x"}`), &hook); err == nil {
		t.Error("a hook result with an unknown member was accepted")
	}
	if err := decodeOutput([]byte(`{"outcome":"retry","outcome":"retry"}`), &hook); err == nil {
		t.Error("a hook result with a repeated member was accepted")
	}
	for _, doc := range []string{`{"writes":[{"id":"w","set":[1]}]}`, `{"writes":[{"id":"w","set":{"a":1,"a":2}}]}`, `{"writes":[{"id":"w","set":{"a":01}}]}`} {
		var action contract.ActionResult
		if err := decodeOutput([]byte(doc), &action); err == nil {
			t.Errorf("action result %s was accepted", doc)
		}
	}
}

func TestCanonicalOutputFallsBackForStringsThatNeedEscaping(t *testing.T) {
	// Validation refuses such names; the writer still never emits them raw.
	r := &contract.PlanResult{Effects: []contract.Effect{{ID: "é\"", Operation: contract.OperationCreate,
		Target: contract.Target{Entity: "a\nb"}, Clear: []string{"f"}}}}
	got, err := canonicalOutput(r)
	if err != nil {
		t.Fatal(err)
	}
	want, _ := canonjson.Marshal(r)
	if !bytes.Equal(got, want) {
		t.Fatalf("got %s, want %s", got, want)
	}
}

func BenchmarkOutput(b *testing.B) {
	doc := []byte(randomPlanDoc(rand.New(rand.NewPCG(5, 6))))
	b.Run("fast", func(b *testing.B) {
		for b.Loop() {
			var out contract.PlanResult
			if err := decodeOutput(doc, &out); err != nil {
				b.Fatal(err)
			}
			if _, err := canonicalOutput(&out); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("encoding-json", func(b *testing.B) {
		for b.Loop() {
			var out contract.PlanResult
			if err := decodeWithEncodingJSON(doc, &out); err != nil {
				b.Fatal(err)
			}
			if _, err := canonjson.Marshal(&out); err != nil {
				b.Fatal(err)
			}
		}
	})
}

// TestDuplicateMembersAreRefused checks a repeated member name is refused
// wherever a module's input or output is read, at any depth.
func TestDuplicateMembersAreRefused(t *testing.T) {
	for _, in := range []string{
		`{"request":{"a":1},"request":{"a":1}}`,
		`{"request":{"a":1,"a":2}}`,
		`{"request":{"o":{"b":[{"c":1,"c":1}]}}}`,
	} {
		if err := contract.CheckObjectMember([]byte(in), "request"); err == nil {
			t.Errorf("CheckObjectMember accepted %s", in)
		}
		if _, err := contract.ParseValue([]byte(in)); err == nil {
			t.Errorf("ParseValue accepted %s", in)
		}
	}
	for _, doc := range []string{
		`{"effects":[{"id":"e","operation":"create","target":{"entity":"a"},"set":{"f":{"value":{"x":1,"x":2}}}}]}`,
		`{"effects":[{"id":"e","operation":"create","target":{"entity":"a"},"set":{"f":{"value":[{"x":{"y":1,"y":1}}]}}}]}`,
	} {
		var out contract.PlanResult
		if err := decodeOutput([]byte(doc), &out); err == nil {
			t.Errorf("decodeOutput accepted %s", doc)
		}
	}
	var action contract.ActionResult
	if err := decodeOutput([]byte(`{"writes":[{"id":"w","set":{"a":{"k":1,"k":2}}}]}`), &action); err == nil {
		t.Error("an action result with a repeated member inside a value was accepted")
	}
}
