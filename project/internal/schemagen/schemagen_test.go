package schemagen

import (
	"encoding/json"
	"testing"
)

type leaf struct {
	Name string   `json:"name" schema:"required,ident" doc:"The name."`
	Tags []string `json:"tags,omitempty" schema:"minItems=1,items=a|b"`
	Size int      `json:"size,omitempty" schema:"minimum=1,maximum=9"`
	Re   string   `json:"re,omitempty" schema:"pattern=^a{1,2}$"`
	Next *leaf    `json:"next,omitempty"`
}

type custom struct{}

func (custom) JSONSchema(ref func(any) map[string]any) map[string]any {
	return map[string]any{"oneOf": []any{map[string]any{"const": "x"}, ref(leaf{})}}
}

type root struct {
	Leaf   leaf            `json:"leaf" schema:"required"`
	Custom custom          `json:"custom,omitempty"`
	Map    map[string]leaf `json:"map,omitempty"`
	Any    any             `json:"any,omitempty"`
	Skip   string          `json:"-"`
}

func TestGenerate(t *testing.T) {
	s := Generate(root{}, "urn:test", "Test")
	b, err := json.Marshal(s)
	if err != nil {
		t.Fatal(err)
	}
	want := `{"$defs":{"custom":{"oneOf":[{"const":"x"},{"$ref":"#/$defs/leaf"}]},` +
		`"leaf":{"additionalProperties":false,"properties":{"name":{"description":"The name.","pattern":"^[a-z][a-z0-9_-]{0,63}$","type":"string"},` +
		`"next":{"$ref":"#/$defs/leaf"},"re":{"pattern":"^a{1,2}$","type":"string"},"size":{"maximum":9,"minimum":1,"type":"integer"},` +
		`"tags":{"items":{"enum":["a","b"],"type":"string"},"minItems":1,"type":"array"}},"required":["name"],"type":"object"},` +
		`"root":{"additionalProperties":false,"properties":{"any":{},"custom":{"$ref":"#/$defs/custom"},` +
		`"leaf":{"$ref":"#/$defs/leaf"},"map":{"additionalProperties":{"$ref":"#/$defs/leaf"},"type":"object"}},"required":["leaf"],"type":"object"}},` +
		`"$id":"urn:test","$ref":"#/$defs/root","$schema":"https://json-schema.org/draft/2020-12/schema","title":"Test"}`
	if string(b) != want {
		t.Fatalf("schema =\n%s\nwant\n%s", b, want)
	}
}
