package contract

import (
	"encoding/json"
	"testing"
)

func FuzzDecodePlanResult(f *testing.F) {
	for _, s := range []string{
		`{"effects":[{"id":"e","operation":"create","target":{"entity":"a"},"set":{"f":{"value":{"x":[1,"y",null]}}},"clear":["g"]}]}`,
		`{"refusal":{"kind":"k"}}`, `{"effects":null,"refusal":null}`, `{"effects":[{"id":"e","set":{"f":{"value":null}}}]}`,
		`{"outcome":"retry","kind":"k"}`, `{"writes":[{"id":"w","set":{"a":1.5}}]}`,
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, doc []byte) {
		// Whatever the decoders accept is one valid JSON document that
		// ParseValue accepts too, and every kept value is valid JSON.
		r, err := DecodePlanResult(doc)
		if err == nil {
			if _, perr := ParseValue(doc); perr != nil {
				t.Fatalf("DecodePlanResult accepted %q, ParseValue refused it: %v", doc, perr)
			}
			for _, e := range r.Effects {
				for _, src := range e.Set {
					if src.Value != nil && !json.Valid(src.Value) {
						t.Fatalf("kept value %q is not JSON", src.Value)
					}
				}
			}
		}
		if _, err := DecodeHookResult(doc); err == nil {
			if _, perr := ParseValue(doc); perr != nil {
				t.Fatalf("DecodeHookResult accepted %q, ParseValue refused it: %v", doc, perr)
			}
		}
		if a, err := DecodeActionResult(doc); err == nil {
			if _, perr := ParseValue(doc); perr != nil {
				t.Fatalf("DecodeActionResult accepted %q, ParseValue refused it: %v", doc, perr)
			}
			for _, w := range a.Writes {
				for _, v := range w.Set {
					if !json.Valid(v) {
						t.Fatalf("kept value %q is not JSON", v)
					}
				}
			}
		}
	})
}
