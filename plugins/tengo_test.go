package plugins_test

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/registrum/registrum/internal/testslack"
	"github.com/registrum/registrum/model"
	"github.com/registrum/registrum/plugins"
	"github.com/registrum/registrum/plugins/contract"
)

// script writes src to a file and loads it as a tengo module of kind.
func script(t *testing.T, cfg plugins.Config, kind model.ModuleKind, src string) (*plugins.Set, error) {
	t.Helper()
	dir := t.TempDir()
	file := filepath.Join(dir, "m.tengo")
	if err := os.WriteFile(file, []byte(src), 0o600); err != nil {
		t.Fatal(err)
	}
	m, _ := pinned(t, "m", model.EngineTengo, kind, file)
	rt := newRuntime(t, cfg)
	set, err := rt.Load(context.Background(), []plugins.Module{m}, dir)
	if err == nil {
		t.Cleanup(func() { _ = set.Close(context.Background()) })
	}
	return set, err
}

const okPlan = `output = {refusal: {kind: "no"}}`

// TestTengoHostile runs scripts that attack the sandbox: each fails with its
// kind and the host is unharmed. Only the endless loop tests the wall-time
// limit and runs under a short one; every other attack runs under a limit far
// above what it needs, so it fails with its own kind however busy the machine.
func TestTengoHostile(t *testing.T) {
	const (
		wall     = 200 * time.Millisecond
		generous = 30 * time.Second
	)
	for _, tc := range []struct {
		name, src string
		want      plugins.FailureKind
	}{
		{"infinite loop", `for {}`, plugins.FailureTimeout},
		{"recursion", `f := func() { x := f(); return x }; output = f()`, plugins.FailureTrap},
		{"allocation bomb", `a := []; for { a = append(a, {x: 1}) }`, plugins.FailureMemory},
		{"string bomb", `text := import("text"); s := text.repeat("x", 2000000); output = s`, plugins.FailureMemory},
		{"string doubling", `s := "xxxxxxxx"; for { s = s + s }`, plugins.FailureMemory},
		{"10 MiB output", `text := import("text"); s := text.repeat("x", 1000000); a := []; for i := 0; i < 11; i++ { a = append(a, s) }; output = {refusal: {kind: a}}`, plugins.FailureInvalidOutput},
		{"runtime error", `x := 1; output = x.y.z`, plugins.FailureTrap},
		{"error value", `output = error("boom")`, plugins.FailureInvalidOutput},
		{"function output", `output = {refusal: func() {}}`, plugins.FailureInvalidOutput},
		{"no output", `x := 1`, plugins.FailureInvalidOutput},
		{"contract breach", `output = {effects: [{id: "a", operation: "delete", target: {entity: "x"}, clear: ["y"]}]}`, plugins.FailureInvalidOutput},
		{"unknown member", `output = {refusal: {kind: "no"}, debug: "x"}`, plugins.FailureInvalidOutput},
		{"float NaN", `math := import("math"); output = {refusal: {kind: math.NaN}}`, plugins.FailureInvalidOutput},
	} {
		t.Run(tc.name, func(t *testing.T) {
			limit := generous
			if tc.want == plugins.FailureTimeout {
				limit = wall
			}
			cfg := plugins.Config{Limits: plugins.Limits{WallTime: limit, MaxAllocs: 5000}}
			set, err := script(t, cfg, model.KindPlanner, tc.src)
			if err != nil {
				t.Fatal(err)
			}
			start := time.Now()
			_, err = set.Call(context.Background(), "m", []byte(`{"request":{}}`))
			took := time.Since(start)
			requireFailure(t, err, tc.want)
			if tc.want == plugins.FailureTimeout && took < limit {
				t.Fatalf("stopped after %s, before its %s limit", took, limit)
			}
			testslack.Stopped(t, tc.name, took, limit)
		})
	}
}

// TestTengoImportsRefused checks a script importing a module with side
// effects (files, processes, printing, clock, randomness) never loads.
func TestTengoImportsRefused(t *testing.T) {
	for _, mod := range []string{"os", "fmt", "times", "rand"} {
		_, err := script(t, plugins.Config{}, model.KindPlanner, mod+` := import("`+mod+`")`+"\n"+okPlan)
		if err == nil || !strings.Contains(err.Error(), `module "m"`) {
			t.Errorf("import %s: want a load error naming the module, got %v", mod, err)
		}
	}
	for _, mod := range []string{"math", "text", "json", "base64", "hex", "enum"} {
		if _, err := script(t, plugins.Config{}, model.KindPlanner, `x := import("`+mod+`")`+"\n"+okPlan); err != nil {
			t.Errorf("import %s: %v", mod, err)
		}
	}
}

// TestTengoAllocLimitEdge checks MaxAllocs: a script that allocates a known
// number of objects runs under a limit above it and fails just below.
func TestTengoAllocLimitEdge(t *testing.T) {
	src := `a := []; for i := 0; i < 100; i++ { a = append(a, i) }; ` + okPlan
	if set, err := script(t, plugins.Config{Limits: plugins.Limits{MaxAllocs: 1000}}, model.KindPlanner, src); err != nil {
		t.Fatal(err)
	} else if _, err := set.Call(context.Background(), "m", []byte(`{"request":{}}`)); err != nil {
		t.Fatalf("under the limit: %v (%v)", err, detail(err))
	}
	set, err := script(t, plugins.Config{Limits: plugins.Limits{MaxAllocs: 50}}, model.KindPlanner, src)
	if err != nil {
		t.Fatal(err)
	}
	_, err = set.Call(context.Background(), "m", []byte(`{"request":{}}`))
	requireFailure(t, err, plugins.FailureMemory)
}

// TestTengoInputIsExact checks the script sees exactly the input document:
// absent and null fields differ, numbers keep their kind, nothing else
// (clock, caller) is present.
func TestTengoInputIsExact(t *testing.T) {
	src := `
json := import("json")
keys := []
for k, _ in input.request { keys = append(keys, k) }
r := input.request
desc := [has(r, "a"), is_undefined(r.a), has(r, "b"), is_int(r.n), is_float(r.f), len(input), type_name(r.o)]
output = {effects: [{id: "e", operation: "create", target: {entity: "x"}, set: {d: {value: desc}, k: {value: len(keys)}}}]}
`
	set, err := script(t, plugins.Config{}, model.KindPlanner, src)
	if err != nil {
		t.Fatal(err)
	}
	out, err := set.Call(context.Background(), "m", []byte(`{"request":{"a":null,"n":3,"f":2.5,"o":{"x":[1]}}}`))
	if err != nil {
		t.Fatalf("%v (%v)", err, detail(err))
	}
	want := `{"effects":[{"id":"e","operation":"create","set":{"d":{"value":[true,true,false,true,true,1,"map"]},"k":{"value":4}},"target":{"entity":"x"}}]}`
	if string(out) != want {
		t.Fatalf("got  %s\nwant %s", out, want)
	}
}

// TestTengoActionHandler checks an action handler's declared writes and
// refusals are enforced.
func TestTengoActionHandler(t *testing.T) {
	src := `
if input.inputs.amount > 100 {
	output = {refusal: {code: input.inputs.code, field: "amount"}}
} else {
	output = {writes: [{id: input.inputs.write, set: {amount: input.inputs.amount}}]}
}`
	dir := t.TempDir()
	file := filepath.Join(dir, "a.tengo")
	if err := os.WriteFile(file, []byte(src), 0o600); err != nil {
		t.Fatal(err)
	}
	m, _ := pinned(t, "a", model.EngineTengo, model.KindActionHandler, file)
	m.ActionWrites = []contract.DeclaredActionWrite{{ID: "payment", Fields: []string{"amount"}}}
	m.Refusals = []string{"too_large"}
	set := loadOne(t, newRuntime(t, plugins.Config{}), m, dir)
	ctx := context.Background()
	res, err := set.ComputeAction(ctx, "a", contract.ActionInput{Inputs: map[string]any{"amount": 5, "write": "payment"}})
	if err != nil || len(res.Writes) != 1 || string(res.Writes[0].Set["amount"]) != "5" {
		t.Fatalf("declared write: %+v %v (%v)", res, err, detail(err))
	}
	res, err = set.ComputeAction(ctx, "a", contract.ActionInput{Inputs: map[string]any{"amount": 500, "code": "too_large"}})
	if err != nil || res.Refusal == nil || res.Refusal.Code != "too_large" || res.Refusal.Field != "amount" {
		t.Fatalf("declared refusal: %+v %v", res, err)
	}
	_, err = set.ComputeAction(ctx, "a", contract.ActionInput{Inputs: map[string]any{"amount": 5, "write": "other"}})
	requireFailure(t, err, plugins.FailureInvalidOutput)
	_, err = set.ComputeAction(ctx, "a", contract.ActionInput{Inputs: map[string]any{"amount": 500, "code": "undeclared"}})
	requireFailure(t, err, plugins.FailureInvalidOutput)
}

// TestTengoStringCapEdge checks the string size cap: a string of exactly
// MaxScriptStringBytes is allowed, one byte more is a memory failure.
func TestTengoStringCapEdge(t *testing.T) {
	for n, want := range map[int]plugins.FailureKind{
		plugins.MaxScriptStringBytes:     "",
		plugins.MaxScriptStringBytes + 1: plugins.FailureMemory,
	} {
		src := `text := import("text"); s := text.repeat("x", ` + itoa(n) + `); ` + okPlan
		set, err := script(t, plugins.Config{}, model.KindPlanner, src)
		if err != nil {
			t.Fatal(err)
		}
		_, err = set.Call(context.Background(), "m", []byte(`{"request":{}}`))
		if want == "" {
			if err != nil {
				t.Fatalf("%d bytes: %v (%v)", n, err, detail(err))
			}
			continue
		}
		requireFailure(t, err, want)
	}
}

// TestTengoNoStateBetweenCalls checks machines reused across calls start
// every call from the script's pristine globals, and that a machine stopped
// at its deadline is not reused.
func TestTengoNoStateBetweenCalls(t *testing.T) {
	src := `
seen := is_undefined(output) ? "fresh" : "stale"
if input.request.loop { for {} }
output = {refusal: {kind: seen}}`
	// 1 s: the loop must meet it, and the plain calls must not, even on a
	// busy machine.
	set, err := script(t, plugins.Config{PoolSize: 1, Limits: plugins.Limits{WallTime: time.Second}}, model.KindPlanner, src)
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	for i := range 6 {
		if i == 3 {
			_, err := set.Call(ctx, "m", []byte(`{"request":{"loop":true}}`))
			requireFailure(t, err, plugins.FailureTimeout)
		}
		out, err := set.Call(ctx, "m", []byte(`{"request":{"loop":false}}`))
		if err != nil {
			t.Fatalf("call %d: %v (%v)", i, err, detail(err))
		}
		if string(out) != `{"refusal":{"kind":"fresh"}}` {
			t.Fatalf("call %d saw a previous call's state: %s", i, out)
		}
	}
}
