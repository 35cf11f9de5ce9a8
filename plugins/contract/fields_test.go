package contract_test

import (
	"bytes"
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"strings"
	"testing"

	"github.com/registrum/registrum/plugins/contract"
)

// readerCases are planner inputs for the parity of ReadObjectMember with
// ParseObjectMember: valid ones of every shape, and broken ones of every
// kind the reader refuses.
var readerCases = []string{
	`{"request":{"a":"x","b":[1,{"c":null}]}}`,
	` { "request" : { } } `,
	"\t{\n\"request\"\r:{\"a\" : 1 , \"b\":\"\"}}\n",
	`{"request":{"a":1},"request":{"a":2}}`,
	`{"request":{"a":1},"request":3}`,
	`{"request":3,"request":{"a":1}}`,
	`{"request":{"a":1,"a":null}}`,
	`{"request":{"a":null,"a":"x"}}`,
	`{"request":{"s":"\u00e9\t\"x\" 1-2","k\u0041":"v","":""}}`,
	`{"request":{"s":"\ud83d\ude00","t":"\/\b\f\n\r\\"}}`,
	`{"request":{"n":-0.5e+10,"m":0,"o":1E3,"p":12.50,"t":true,"f":false,"z":null}}`,
	`{"request":{"o":{"b":2,"a":{"c":[[],{}]},"b":3},"a":[1,"2",null,true,{"x":"y"}]}}`,
	`{"request":{"long":"` + strings.Repeat("long text with spaces ", 40) + `","next":"\\"}}`,
	"{\"request\":{\"raw\":\"caf\xc3\xa9 \xff bytes\"}}",
	`{"request":{"a":"` + strings.Repeat("x", 31) + `\"` + strings.Repeat("y", 9) + `"}}`,
	`{"request":` + strings.Repeat(`{"a":`, contract.MaxDepth-2) + `1` + strings.Repeat(`}`, contract.MaxDepth-2) + `}`,
	`{"request":{"a":` + strings.Repeat(`[`, contract.MaxDepth-2) + strings.Repeat(`]`, contract.MaxDepth-2) + `}}`,
	// Refused.
	`{"request":` + strings.Repeat(`{"a":`, contract.MaxDepth-1) + `1` + strings.Repeat(`}`, contract.MaxDepth-1) + `}`,
	`{"request":{"a":` + strings.Repeat(`[`, contract.MaxDepth-1) + strings.Repeat(`]`, contract.MaxDepth-1) + `}}`,
	`{}`, `{"request":1}`, `{"request":null}`, `{"request":[]}`, `{"request":{},"other":{}}`,
	`{"other":{}}`, `{"other":1,"request":{}}`, `{"request":{}} x`, `{"request":{}`, `{"request" {}}`,
	`[]`, ``, ` `, `{"request":{"a"}}`, `{"request":{"a":1,}}`, `{"request":{,}}`, `{"request":{"a":[1,]}}`,
	`{"request":{"a":01}}`, `{"request":{"a":1.}}`, `{"request":{"a":-}}`, `{"request":{"a":1e}}`,
	`{"request":{"a":"\x"}}`, `{"request":{"a":"\u12"}}`, `{"request":{"a":"\ud83d\u12"}}`,
	"{\"request\":{\"a\":\"\\n\x01\"}}", `{"request":{"a":tru}}`, `{"request":{"a":nul}}`,
	`{"request":{"a":falsey}}`, `{"request":{"a":"x}}`, `{"request":{"a" "x"}}`, `{"request":{1:2}}`,
	`{"request":{"a":{"b":1}}`, `{"request":{"a":[}}`, `{"request":{"a":1}}}`, `{"request":{"a":+1}}`,
	`{"request":{"a\x":1}}`, `{"request":{"a":"x" "b":1}}`, `{"request":{"a":{"b" 1}}}`,
}

// TestReadObjectMemberParity checks the fast reader accepts exactly what
// ParseObjectMember accepts and reads the same members.
func TestReadObjectMemberParity(t *testing.T) {
	var r contract.FieldsReader
	for _, in := range readerCases {
		checkReaderParity(t, &r, []byte(in))
	}
}

// FuzzReadObjectMember checks the same parity on any input.
func FuzzReadObjectMember(f *testing.F) {
	for _, in := range readerCases {
		f.Add([]byte(in))
	}
	var r contract.FieldsReader
	f.Fuzz(func(t *testing.T, b []byte) { checkReaderParity(t, &r, b) })
}

func checkReaderParity(t *testing.T, r *contract.FieldsReader, in []byte) {
	t.Helper()
	m, err := contract.ParseObjectMember(bytes.Clone(in), "request")
	f, ferr := r.ReadObjectMember(in, "request")
	if (err == nil) != (ferr == nil) {
		t.Fatalf("%q: ParseObjectMember error %v, ReadObjectMember error %v", in, err, ferr)
	}
	if err == nil {
		compareFields(t, string(in), m, f)
	}
}

// compareFields checks the view f reads the members of the parsed object m.
func compareFields(t *testing.T, where string, m map[string]any, f contract.Fields) {
	t.Helper()
	if f.Len() < len(m) {
		t.Fatalf("%s: %d members viewed, %d parsed", where, f.Len(), len(m))
	}
	for k, v := range m {
		if !f.Has(k) || f.IsNull(k) != (v == nil) {
			t.Fatalf("%s: member %q: Has %v IsNull %v, parsed %#v", where, k, f.Has(k), f.IsNull(k), v)
		}
		s, ok := f.String(k)
		if ws, wok := v.(string); ok != wok || s != ws {
			t.Fatalf("%s: String(%q) = %q, %v; parsed %#v", where, k, s, ok, v)
		}
		b, ok := f.Bool(k)
		if wb, wok := v.(bool); ok != wok || b != wb {
			t.Fatalf("%s: Bool(%q) = %v, %v; parsed %#v", where, k, b, ok, v)
		}
		n, ok := f.Number(k)
		if wn, wok := v.(json.Number); ok != wok || n != wn {
			t.Fatalf("%s: Number(%q) = %q, %v; parsed %#v", where, k, n, ok, v)
		}
		want, err := contract.AppendValue(nil, v)
		if err != nil {
			t.Fatal(err)
		}
		got, err := contract.AppendRawValue(nil, f.Raw(k))
		if err != nil || !bytes.Equal(got, want) {
			t.Fatalf("%s: AppendRawValue(Raw(%q)) = %s, %v; AppendValue gives %s", where, k, got, err, want)
		}
		inner, ok := f.Object(k)
		wm, wok := v.(map[string]any)
		if ok != wok {
			t.Fatalf("%s: Object(%q) ok %v; parsed %#v", where, k, ok, v)
		}
		if ok {
			compareFields(t, where+"."+k, wm, inner)
		}
	}
	for _, absent := range []string{"absent", "A", "x "} {
		if _, ok := m[absent]; ok {
			continue
		}
		if f.Has(absent) || f.IsNull(absent) || f.Raw(absent) != nil {
			t.Fatalf("%s: absent %q is seen", where, absent)
		}
		if _, ok := f.String(absent); ok {
			t.Fatalf("%s: absent %q is a string", where, absent)
		}
		if _, ok := f.Object(absent); ok {
			t.Fatalf("%s: absent %q is an object", where, absent)
		}
	}
}

// TestFieldsReaderReuse checks a reader's second result is right after a
// first one with more members (its index is reused).
func TestFieldsReaderReuse(t *testing.T) {
	var r contract.FieldsReader
	if _, err := r.ReadObjectMember([]byte(`{"request":{"a":1,"b":2,"c":3}}`), "request"); err != nil {
		t.Fatal(err)
	}
	f, err := r.ReadObjectMember([]byte(`{"request":{"d":"x"}}`), "request")
	if err != nil {
		t.Fatal(err)
	}
	if f.Len() != 1 || f.Has("a") || !f.Has("d") {
		t.Fatalf("reused view: %d members, a %v, d %v", f.Len(), f.Has("a"), f.Has("d"))
	}
	var zero contract.Fields
	if zero.Has("a") || zero.Len() != 0 {
		t.Fatal("the zero Fields is not empty")
	}
}

// TestAppendRawValue checks raw values are written as AppendValue writes
// their parsed form, and that what is not one JSON value is refused.
func TestAppendRawValue(t *testing.T) {
	for _, raw := range []string{`"x"`, ` "\u00e9\/" `, `1.50`, `-0`, `1e999`, `true`, `false`, `null`,
		`{"b":1,"a":[1, 2],"b":{"d":null,"c":"\n"}}`, `[ ]`, "\"\xff\"", `"` + strings.Repeat(`ab\"`, 20) + `"`} {
		v, err := contract.ParseCheckedValue([]byte(raw))
		if err != nil {
			t.Fatal(err)
		}
		want, err := contract.AppendValue(nil, v)
		if err != nil {
			t.Fatal(err)
		}
		got, err := contract.AppendRawValue([]byte("prefix:"), []byte(raw))
		if err != nil || string(got) != "prefix:"+string(want) {
			t.Errorf("AppendRawValue(%s) = %s, %v; want prefix:%s", raw, got, err, want)
		}
	}
	for _, bad := range []string{``, ` `, `1 2`, `"x" y`, `tru`, `01`, `{`, `[1,]`, `"\x"`, `x`} {
		if got, err := contract.AppendRawValue(nil, []byte(bad)); err == nil {
			t.Errorf("AppendRawValue(%q) = %s, want an error", bad, got)
		}
	}
}

// TestPlanWriterMatchesAppendJSON builds many random plans twice, as a
// PlanResult and through a PlanWriter, and checks the bytes are identical.
func TestPlanWriterMatchesAppendJSON(t *testing.T) {
	rng := rand.New(rand.NewPCG(6, 50))
	names := []string{"a", "b", "phone", "address", "case_notes", "guardian_id", "é", "with \"quote\"", "", "aa", "B"}
	pick := func() string { return names[rng.IntN(len(names))] }
	values := []any{nil, true, false, "text", "line\nbreak\t\"q\"", "caf\xc3\xa9\xff", json.Number("1.50"), json.Number("-3e7"),
		int64(42), 2.5, []any{json.Number("1"), "x", nil}, map[string]any{"z": "1", "a": []any{}}, []string{"p", "q"},
		map[string]string{"k": "v"}, json.RawMessage(`{"r":1}`), strings.Repeat("long value ", 30)}
	var w contract.PlanWriter
	for n := range 3000 {
		var res contract.PlanResult
		prefix := []byte(fmt.Sprintf("prefix %d:", n))
		w.Reset(bytes.Clone(prefix))
		refuseAt := -1
		if rng.IntN(5) == 0 {
			refuseAt = rng.IntN(4)
		}
		effects := rng.IntN(4)
		for e := range effects + 1 {
			if e == refuseAt {
				kind := pick()
				res.Refusal = &contract.Refusal{Kind: kind}
				w.Refuse(kind)
			}
			if e == effects {
				break
			}
			eff := contract.Effect{ID: pick(), Operation: contract.OperationPatch, Target: contract.Target{Entity: pick()}}
			switch rng.IntN(3) {
			case 0:
				eff.Operation, eff.Target = contract.OperationCreate, contract.Target{Entity: pick()}
				w.Create(eff.ID, eff.Target.Entity)
			case 1:
				eff.Target.FromField = pick()
				w.Patch(eff.ID, eff.Target)
			default:
				eff.Target.FromEffect = pick()
				w.Effect(eff.ID, eff.Operation, eff.Target)
			}
			for range rng.IntN(7) {
				field := pick()
				if eff.Set == nil {
					eff.Set = map[string]contract.FieldSource{}
				}
				switch rng.IntN(6) {
				case 0:
					eff.Clear = append(eff.Clear, field)
					w.Clear(field)
					continue
				case 1:
					name := pick()
					eff.Set[field] = contract.FieldSource{FromField: name}
					w.SetFromField(field, name)
				case 2:
					id := pick()
					eff.Set[field] = contract.FieldSource{FromEffect: id}
					w.SetFromEffect(field, id)
				case 3:
					s := pick()
					eff.Set[field] = contract.FieldSource{Value: mustValue(t, s)}
					w.SetString(field, s)
				case 4:
					v := values[rng.IntN(len(values))]
					eff.Set[field] = contract.FieldSource{Value: mustValue(t, v)}
					w.SetValue(field, v)
				default:
					v := values[rng.IntN(len(values))]
					raw := mustValue(t, v)
					if _, ok := v.(string); ok && rng.IntN(2) == 0 {
						raw = bytes.ReplaceAll(raw, []byte(`\"`), []byte(`\u0022`)) // escaped differently
					}
					eff.Set[field] = contract.FieldSource{Value: mustValue(t, v)}
					w.SetRaw(field, raw)
				}
			}
			res.Effects = append(res.Effects, eff)
		}
		want := res.AppendJSON(bytes.Clone(prefix))
		got := w.Finish()
		if !bytes.Equal(got, want) {
			t.Fatalf("plan %d:\nwriter     %s\nAppendJSON %s", n, got, want)
		}
		if w.Refused() != (res.Refusal != nil) {
			t.Fatalf("plan %d: Refused %v", n, w.Refused())
		}
	}
}

func mustValue(t *testing.T, v any) json.RawMessage {
	b, err := contract.AppendValue(nil, v)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// TestPlanWriterMisuse checks a set before any effect and a value that is
// not JSON panic (a trap in a guest), and that calls after a refusal are
// ignored.
func TestPlanWriterMisuse(t *testing.T) {
	var w contract.PlanWriter
	for name, f := range map[string]func(){
		"set before effect":   func() { w.SetString("a", "x") },
		"clear before effect": func() { w.Clear("a") },
		"bad raw":             func() { w.Create("e", "x"); w.SetRaw("a", []byte("{")) },
		"bad value":           func() { w.Create("e", "x"); w.SetValue("a", struct{}{}) },
	} {
		w.Reset(nil)
		func() {
			defer func() {
				if recover() == nil {
					t.Errorf("%s: no panic", name)
				}
			}()
			f()
		}()
	}
	w.Reset(nil)
	w.Refuse("first")
	w.Refuse("second")
	w.SetString("a", "x") // ignored, no panic
	if got := string(w.Finish()); got != `{"refusal":{"kind":"first"}}` {
		t.Fatalf("refused plan: %s", got)
	}
	w.Reset(nil)
	if got := string(w.Finish()); got != `{"effects":[]}` {
		t.Fatalf("empty plan: %s", got)
	}
}
