package plugins_test

import (
	"bytes"
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"testing"

	"github.com/santhosh-tekuri/jsonschema/v6"

	"github.com/registrum/registrum/plugins"
	"github.com/registrum/registrum/plugins/contract"
)

// schema compiles docs/schemas/<name>.schema.json.
func schema(t *testing.T, name string) *jsonschema.Schema {
	t.Helper()
	file := filepath.Join(repoRoot, "docs", "schemas", name+".schema.json")
	f, err := os.Open(file)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	doc, err := jsonschema.UnmarshalJSON(f)
	if err != nil {
		t.Fatalf("%s: %v", file, err)
	}
	c := jsonschema.NewCompiler()
	c.AssertFormat()
	if err := c.AddResource(file, doc); err != nil {
		t.Fatal(err)
	}
	s, err := c.Compile(file)
	if err != nil {
		t.Fatalf("%s: %v", file, err)
	}
	return s
}

func schemaAccepts(t *testing.T, s *jsonschema.Schema, doc []byte) bool {
	t.Helper()
	v, err := jsonschema.UnmarshalJSON(bytes.NewReader(doc))
	if err != nil {
		t.Fatalf("%s: %v", doc, err)
	}
	return s.Validate(v) == nil
}

// TestSchemasMatchTheRuntime checks the published JSON Schemas accept every
// output the example modules produce, and agree with the runtime's own
// checks on documents each rule refuses.
func TestSchemasMatchTheRuntime(t *testing.T) {
	ctx := context.Background()
	planSchema := schema(t, "plugin-plan")
	inputSchema := schema(t, "plugin-planner-input")
	runWASM, _ := planners(t, plugins.Config{})
	for _, tc := range plannerCases {
		input := []byte(`{"request":` + tc.request + `}`)
		if !schemaAccepts(t, inputSchema, input) {
			t.Errorf("planner input schema refuses %s", input)
		}
		out, err := runWASM(ctx, input)
		if err != nil {
			t.Fatal(err)
		}
		if !schemaAccepts(t, planSchema, out) {
			t.Errorf("plan schema refuses %s", out)
		}
	}
	for _, doc := range []string{
		`{}`,
		`{"effects":[]}`,
		`{"refusal":{"kind":"a"},"effects":[{"id":"a","operation":"patch","target":{"entity":"e","fromField":"f"},"clear":["x"]}]}`,
		`{"refusal":{"kind":"two words"}}`,
		`{"refusal":{"kind":"k","detail":"leak"}}`,
		`{"effects":[{"id":"a","operation":"delete","target":{"entity":"e"},"clear":["x"]}]}`,
		`{"effects":[{"id":"a","operation":"create","target":{"entity":"e","fromField":"f"},"clear":["x"]}]}`,
		`{"effects":[{"id":"a","operation":"patch","target":{"entity":"e"},"clear":["x"]}]}`,
		`{"effects":[{"id":"a","operation":"patch","target":{"entity":"e","fromField":"f","fromEffect":"g"},"clear":["x"]}]}`,
		`{"effects":[{"id":"a","operation":"patch","target":{"entity":"e","fromField":"f"}}]}`,
		`{"effects":[{"id":"a","operation":"patch","target":{"entity":"e","fromField":"f"},"set":{"x":{}}}]}`,
		`{"effects":[{"id":"a","operation":"patch","target":{"entity":"e","fromField":"f"},"set":{"x":{"value":1,"fromField":"y"}}}]}`,
		`{"effects":[{"id":"a","operation":"patch","target":{"entity":"e","fromField":"f"},"clear":["x","x"]}]}`,
		`{"effects":[{"id":"a","operation":"patch","target":{"entity":"e","fromField":"f"},"clear":["x"],"debug":1}]}`,
	} {
		var p contract.PlanResult
		dec := json.NewDecoder(bytes.NewReader([]byte(doc)))
		dec.DisallowUnknownFields()
		runtimeOK := dec.Decode(&p) == nil && p.Validate(nil) == nil
		if runtimeOK || schemaAccepts(t, planSchema, []byte(doc)) {
			t.Errorf("%s: runtime accepts %v, schema accepts %v; both must refuse", doc, runtimeOK, !runtimeOK)
		}
	}

	hookResult := schema(t, "plugin-hook-result")
	for doc, ok := range map[string]bool{
		`{"outcome":"acknowledged"}`:                true,
		`{"outcome":"retry","kind":"busy"}`:         true,
		`{"outcome":"retry"}`:                       false,
		`{"outcome":"acknowledged","kind":"x"}`:     false,
		`{"outcome":"later"}`:                       false,
		`{"outcome":"acknowledged","message":"hi"}`: false,
	} {
		if schemaAccepts(t, hookResult, []byte(doc)) != ok {
			t.Errorf("hook result schema on %s: want %v", doc, ok)
		}
		var r contract.HookResult
		dec := json.NewDecoder(bytes.NewReader([]byte(doc)))
		dec.DisallowUnknownFields()
		if (dec.Decode(&r) == nil && r.Validate() == nil) != ok {
			t.Errorf("runtime on %s: want %v", doc, ok)
		}
	}

	actionResult := schema(t, "plugin-action-result")
	for doc, ok := range map[string]bool{
		`{"writes":[{"id":"w","set":{"a":1}}]}`:                         true,
		`{"refusal":{"code":"no","field":"a"}}`:                         true,
		`{"refusal":{"code":"no"},"writes":[{"id":"w","set":{"a":1}}]}`: false,
		`{"writes":[]}`:                    false,
		`{"writes":[{"id":"w","set":{}}]}`: false,
		`{"refusal":{"kind":"no"}}`:        false,
	} {
		if schemaAccepts(t, actionResult, []byte(doc)) != ok {
			t.Errorf("action result schema on %s: want %v", doc, ok)
		}
		var r contract.ActionResult
		dec := json.NewDecoder(bytes.NewReader([]byte(doc)))
		dec.DisallowUnknownFields()
		if (dec.Decode(&r) == nil && r.Validate(nil, nil) == nil) != ok {
			t.Errorf("runtime on %s: want %v", doc, ok)
		}
	}
	if !schemaAccepts(t, schema(t, "plugin-action-input"), []byte(`{"inputs":{"amount":1,"note":null}}`)) {
		t.Error("action input schema refuses a valid input")
	}
}

// TestHookInputSchema checks the hook input schema describes the captured
// body envelope the example handler acknowledges, and refuses extra members.
func TestHookInputSchema(t *testing.T) {
	s := schema(t, "plugin-hook-input")
	body := capturedBody
	if !schemaAccepts(t, s, []byte(body)) {
		t.Fatal("schema refuses a captured body")
	}
	extra := body[:len(body)-1] + `,"attempt":2}`
	if schemaAccepts(t, s, []byte(extra)) {
		t.Fatal("schema accepts a body with a delivery header member")
	}
}
