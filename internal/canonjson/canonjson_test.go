package canonjson

import (
	"bytes"
	"encoding/json"
	"testing"
)

func TestTransformOrdersMembersAndNumbers(t *testing.T) {
	got, err := Transform([]byte(`{"b": 1.50, "a": [true, null, "\u00e9"], "c": 1e2}`))
	if err != nil {
		t.Fatal(err)
	}
	want := `{"a":[true,null,"é"],"b":1.5,"c":100}`
	if string(got) != want {
		t.Fatalf("Transform = %s, want %s", got, want)
	}
}

func TestDigestIsStableAcrossMemberOrder(t *testing.T) {
	d1, err := Digest(map[string]any{"x": 1, "y": "z"})
	if err != nil {
		t.Fatal(err)
	}
	d2, err := Transform([]byte(`{"y":"z","x":1}`))
	if err != nil {
		t.Fatal(err)
	}
	if d1 != DigestBytes(d2) {
		t.Fatalf("digests differ: %s vs %s", d1, DigestBytes(d2))
	}
	if len(d1) != len("sha256:")+64 {
		t.Fatalf("digest %q has the wrong shape", d1)
	}
}

func TestTransformRejectsInvalidJSON(t *testing.T) {
	if _, err := Transform([]byte(`{"a":`)); err == nil {
		t.Fatal("want an error for truncated JSON")
	}
}

// TestMarshalOfDecodedValuesIsTheCanonicalParse holds Marshal's direct way
// for decoded values to the canonicalizing parse of encoding/json's output,
// refusals included.
func TestMarshalOfDecodedValuesIsTheCanonicalParse(t *testing.T) {
	for _, v := range []any{
		map[string]any{"top": 50, "count": true, "select": []any{"b", "a"}, "filter": "(a eq '<&>')", "n": int64(1) << 60},
		map[string]any{"\u00e9": "x", "e\u0301": []any{nil, 1.5, json.Number("1e3")}},
		[]any{"\x00\x1f\"\\\u2028", map[string]any{}},
		map[string]any{"nil map": map[string]any(nil), "nil slice": []any(nil), "empty": []any{}},
		map[string]any(nil),
		[]any(nil),
	} {
		want, err := marshalReflect(v)
		if err != nil {
			t.Fatal(err)
		}
		got, err := Marshal(v)
		if err != nil || !bytes.Equal(got, want) {
			t.Fatalf("Marshal(%#v) = %s (%v), the canonical parse %s", v, got, err, want)
		}
	}
	// Two invalid names that become the same name once replaced are refused,
	// as the canonical parse refuses them.
	if _, err := Marshal(map[string]any{"\xff": 1, "\xfe": 2}); err == nil {
		t.Fatal("Marshal accepted two names that are the same once made valid")
	}
	// Numbers strconv reads but JSON's grammar does not have are refused,
	// as encoding/json refuses them; JSON's own are written (and the empty
	// number as encoding/json writes it, 0).
	for _, n := range []string{"0x10", "+1", ".5", "1.", "01", "1e", "-", "Inf", "NaN", "1_0", "0x1p-2", " 1"} {
		if b, err := Marshal(map[string]any{"n": json.Number(n)}); err == nil {
			t.Errorf("Marshal of json.Number(%q) = %s, want a refusal", n, b)
		}
	}
	for _, n := range []string{"0", "-0", "10", "1.5", "-1.25e+3", "2E-2", "1e4", ""} {
		want, err := marshalReflect(json.Number(n))
		if err != nil {
			t.Fatal(err)
		}
		if got, err := Marshal(json.Number(n)); err != nil || !bytes.Equal(got, want) {
			t.Errorf("Marshal of json.Number(%q) = %s (%v), want %s", n, got, err, want)
		}
	}
	// What AppendValue does not take is encoded by encoding/json.
	got, err := Marshal(struct {
		B int    `json:"b"`
		A string `json:"a"`
	}{1, "x"})
	if err != nil || string(got) != `{"a":"x","b":1}` {
		t.Fatalf("Marshal(struct) = %s (%v)", got, err)
	}
}
