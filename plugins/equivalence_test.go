package plugins_test

import (
	"bytes"
	"context"
	"errors"
	"path/filepath"
	"strings"
	"testing"

	"github.com/registrum/registrum/examples/plugins/planner/plan"
	"github.com/registrum/registrum/internal/canonjson"
	"github.com/registrum/registrum/model"
	"github.com/registrum/registrum/plugins"
	"github.com/registrum/registrum/plugins/contract"
	"github.com/registrum/registrum/sdk/guest"
)

// planners returns the example planner loaded in each engine.
func planners(t testing.TB, cfg plugins.Config) (wasm, tengo func(context.Context, []byte) ([]byte, error)) {
	t.Helper()
	rt := newRuntime(t, cfg)
	w, wdir := pinned(t, "planner", model.EngineWASM, model.KindPlanner, filepath.Join(wasmDir, "planner.wasm"))
	g, gdir := pinned(t, "planner", model.EngineTengo, model.KindPlanner, examplePath("planner/planner.tengo"))
	w.Writes, g.Writes = plan.Writes, plan.Writes
	ws := loadOne(t, rt, w, wdir)
	gs := loadOne(t, rt, g, gdir)
	return func(ctx context.Context, in []byte) ([]byte, error) { return ws.Call(ctx, "planner", in) },
		func(ctx context.Context, in []byte) ([]byte, error) { return gs.Call(ctx, "planner", in) }
}

// plannerCases exercise every branch of the example planner, including the
// difference between an absent field and an explicit null.
var plannerCases = []struct {
	name, request, want string
}{
	{"new guardian and contact details",
		`{"child_id":"c-1","guardian":{"name":"Ama Mensah","relationship":"aunt"},"address":{"line1":"4 Rue Haute","city":"Lomé"},"phone":"+228 90-12-34-56","notes":"moved in with aunt"}`,
		`{"effects":[{"id":"new_guardian","operation":"create","set":{"name":{"value":"Ama Mensah"},"relationship":{"value":"aunt"}},"target":{"entity":"guardian"}},{"id":"update_child","operation":"patch","set":{"address":{"fromField":"address"},"case_notes":{"fromField":"notes"},"guardian_id":{"fromEffect":"new_guardian"},"phone":{"value":"+22890123456"}},"target":{"entity":"child","fromField":"child_id"}}]}`},
	{"explicit nulls clear",
		`{"child_id":"c-2","guardian":null,"address":null,"phone":null}`,
		`{"effects":[{"clear":["guardian_id","address","phone"],"id":"update_child","operation":"patch","target":{"entity":"child","fromField":"child_id"}}]}`},
	{"absent fields are left alone",
		`{"child_id":"c-3","phone":"123 456"}`,
		`{"effects":[{"id":"update_child","operation":"patch","set":{"phone":{"value":"123456"}},"target":{"entity":"child","fromField":"child_id"}}]}`},
	{"guardian with a numeric relationship code",
		`{"child_id":"c-4","guardian":{"name":"K","relationship":1.50}}`,
		`{"effects":[{"id":"new_guardian","operation":"create","set":{"name":{"value":"K"},"relationship":{"value":1.5}},"target":{"entity":"guardian"}},{"id":"update_child","operation":"patch","set":{"guardian_id":{"fromEffect":"new_guardian"}},"target":{"entity":"child","fromField":"child_id"}}]}`},
	{"unicode and escapes survive", `{"child_id":"c-5","phone":"\u00e9\t\"x\" 1-2"}`,
		`{"effects":[{"id":"update_child","operation":"patch","set":{"phone":{"value":"é\t\"x\"12"}},"target":{"entity":"child","fromField":"child_id"}}]}`},
	{"missing child", `{"phone":"1"}`, `{"refusal":{"kind":"child_missing"}}`},
	{"null child", `{"child_id":null}`, `{"refusal":{"kind":"child_missing"}}`},
	{"guardian without name", `{"child_id":"c","guardian":{"relationship":"x"}}`, `{"refusal":{"kind":"guardian_incomplete"}}`},
	{"guardian not an object", `{"child_id":"c","guardian":"Ama"}`, `{"refusal":{"kind":"guardian_incomplete"}}`},
	{"nothing to change", `{"child_id":"c","phone":12}`, `{"refusal":{"kind":"nothing_to_change"}}`},
	{"empty request", `{}`, `{"refusal":{"kind":"child_missing"}}`},
}

// TestPlannerEquivalence runs the example planner in every form (tengo; Go
// against the guest SDK's fast and map-based APIs, each compiled to
// WebAssembly and run natively) on every case: all plans must be
// byte-identical canonical JSON, and equal the expected plan.
func TestPlannerEquivalence(t *testing.T) {
	ctx := context.Background()
	runWASM, runTengo := planners(t, plugins.Config{})
	m, mdir := pinned(t, "planner", model.EngineWASM, model.KindPlanner, filepath.Join(wasmDir, "planner-map.wasm"))
	m.Writes = plan.Writes
	mapSet := loadOne(t, newRuntime(t, plugins.Config{}), m, mdir)
	nativeMap, nativeFast := runNative(t, plannerInputs(plannerCases))
	for i, tc := range plannerCases {
		t.Run(tc.name, func(t *testing.T) {
			input := []byte(`{"request":` + tc.request + `}`)
			w, err := runWASM(ctx, input)
			if err != nil {
				t.Fatalf("wasm: %v (%v)", err, detail(err))
			}
			g, err := runTengo(ctx, input)
			if err != nil {
				t.Fatalf("tengo: %v (%v)", err, detail(err))
			}
			wm, err := mapSet.Call(ctx, "planner", input)
			if err != nil {
				t.Fatalf("wasm (map API): %v (%v)", err, detail(err))
			}
			if !bytes.Equal(w, wm) {
				t.Fatalf("wasm plans differ:\nfast API %s\nmap API  %s", w, wm)
			}
			if !bytes.Equal(nativeMap[i], nativeFast[i]) {
				t.Fatalf("native plans differ:\nmap  %s\nfast %s", nativeMap[i], nativeFast[i])
			}
			native, err := canonjson.Transform(nativeFast[i])
			if err != nil {
				t.Fatal(err)
			}
			if !bytes.Equal(w, g) || !bytes.Equal(w, native) {
				t.Fatalf("plans differ:\nwasm   %s\ntengo  %s\nnative %s", w, g, native)
			}
			want, err := canonjson.Transform([]byte(tc.want))
			if err != nil {
				t.Fatal(err)
			}
			if !bytes.Equal(w, want) {
				t.Fatalf("plan:\n got %s\nwant %s", w, want)
			}
		})
	}
}

// plannerInputs returns the planner inputs of cases.
func plannerInputs(cases []struct{ name, request, want string }) [][]byte {
	inputs := make([][]byte, len(cases))
	for i, tc := range cases {
		inputs[i] = []byte(`{"request":` + tc.request + `}`)
	}
	return inputs
}

// runNative runs the example planner natively on every input, written
// against the map-based API (plan.Plan) and against the fast API
// (plan.PlanFast), and returns both outputs as written (not canonicalised).
func runNative(t *testing.T, inputs [][]byte) (byMap, byFast [][]byte) {
	t.Helper()
	guest.HandlePlan(plan.Plan)
	for _, in := range inputs {
		byMap = append(byMap, guest.RunPlan(in))
	}
	guest.HandlePlanFast(plan.PlanFast)
	for _, in := range inputs {
		byFast = append(byFast, guest.RunPlan(in))
	}
	return byMap, byFast
}

// TestPlannerFastMatchesMap checks the example planner written against the
// fast API writes byte for byte the plan the map-based one writes, on every
// equivalence case and on every combination of absent, null, well- and
// ill-typed values of the fields it reads, repeated members included.
func TestPlannerFastMatchesMap(t *testing.T) {
	inputs := plannerInputs(plannerCases)
	choices := [][]string{
		{``, `"child_id":null`, `"child_id":""`, `"child_id":"c-1"`, `"child_id":5`, `"child_id":"c-\u0041","child_id":"c-2"`},
		{``, `"guardian":null`, `"guardian":"Ama"`, `"guardian":{}`, `"guardian":{"name":""}`, `"guardian":{"name":"K"}`,
			`"guardian":{"name":"K","relationship":null}`, `"guardian":{"name":"K","relationship":{"b":1,"a":"\u0041"}}`,
			`"guardian":{"name":"\u00c9\"","relationship":1.50,"name":"Ama"}`, `"guardian":{"name":"K"},"guardian":null`},
		{``, `"address":null`, `"address":{"line1":"x","city":"Lomé"}`, `"address":"4 Rue Haute"`, `"address":3`},
		{``, `"phone":null`, `"phone":"+228 90-12-34-56"`, `"phone":""`, `"phone":12`, `"phone":"a\"b - c\u002d"`, "\"phone\":\"1 \xff-2\""},
		{``, `"notes":null`, `"notes":"moved"`, `"notes":1`, `"notes":"\u00e9 ` + strings.Repeat("n", 300) + `"`},
	}
	var combine func(i int, members []string)
	combine = func(i int, members []string) {
		if i == len(choices) {
			inputs = append(inputs, []byte(`{"request":{`+strings.Join(members, ",")+`}}`))
			return
		}
		for _, c := range choices[i] {
			if c == "" {
				combine(i+1, members)
			} else {
				combine(i+1, append(members, c))
			}
		}
	}
	combine(0, nil)
	byMap, byFast := runNative(t, inputs)
	for i, in := range inputs {
		if !bytes.Equal(byMap[i], byFast[i]) {
			t.Fatalf("input %s:\nmap  %s\nfast %s", in, byMap[i], byFast[i])
		}
	}
	t.Logf("%d inputs", len(inputs))
}

// TestPlanTyped checks the typed Plan call gives the same plan as Call and
// keeps an explicit null distinct from an absent field.
func TestPlanTyped(t *testing.T) {
	ctx := context.Background()
	rt := newRuntime(t, plugins.Config{})
	m, dir := pinned(t, "p", model.EngineWASM, model.KindPlanner, filepath.Join(wasmDir, "planner.wasm"))
	set := loadOne(t, rt, m, dir)
	res, err := set.Plan(ctx, "p", contract.PlannerInput{Request: map[string]any{"child_id": "c", "phone": nil}})
	if err != nil {
		t.Fatal(err)
	}
	if len(res.Effects) != 1 || len(res.Effects[0].Clear) != 1 || res.Effects[0].Clear[0] != "phone" {
		t.Fatalf("explicit null phone: %+v", res)
	}
	res, err = set.Plan(ctx, "p", contract.PlannerInput{Request: map[string]any{"child_id": "c"}})
	if err != nil {
		t.Fatal(err)
	}
	if res.Refusal == nil || res.Refusal.Kind != "nothing_to_change" {
		t.Fatalf("absent phone: %+v", res)
	}
}

// TestHookEquivalence runs the example hook handler in both engines on the
// same captured bodies.
func TestHookEquivalence(t *testing.T) {
	ctx := context.Background()
	rt := newRuntime(t, plugins.Config{})
	w, wdir := pinned(t, "hook", model.EngineWASM, model.KindHookHandler, filepath.Join(wasmDir, "hook.wasm"))
	g, gdir := pinned(t, "hook", model.EngineTengo, model.KindHookHandler, examplePath("hook/hook.tengo"))
	ws, gs := loadOne(t, rt, w, wdir), loadOne(t, rt, g, gdir)
	cases := map[string]struct{ body, want string }{
		"acknowledged":     {capturedBody, `{"outcome":"acknowledged"}`},
		"no data":          {`{"subject":{"recordRevision":1}}`, `{"kind":"unexpected_envelope","outcome":"retry"}`},
		"revision zero":    {`{"data":{"entity":"e","packageRevision":"sha256:x"},"subject":{"recordRevision":0}}`, `{"kind":"unexpected_envelope","outcome":"retry"}`},
		"revision float":   {`{"data":{"entity":"e","packageRevision":"sha256:x"},"subject":{"recordRevision":1.5}}`, `{"kind":"unexpected_envelope","outcome":"retry"}`},
		"bad package hash": {`{"data":{"entity":"e","packageRevision":"md5:x"},"subject":{"recordRevision":2}}`, `{"kind":"unexpected_envelope","outcome":"retry"}`},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			a, err := ws.Call(ctx, "hook", []byte(tc.body))
			if err != nil {
				t.Fatalf("wasm: %v (%v)", err, detail(err))
			}
			b, err := gs.Call(ctx, "hook", []byte(tc.body))
			if err != nil {
				t.Fatalf("tengo: %v (%v)", err, detail(err))
			}
			if !bytes.Equal(a, b) || string(a) != tc.want {
				t.Fatalf("wasm %s, tengo %s, want %s", a, b, tc.want)
			}
		})
	}
	res, err := ws.HandleEvent(ctx, "hook", []byte(capturedBody))
	if err != nil || res.Outcome != contract.HookAcknowledged {
		t.Fatalf("HandleEvent: %+v, %v", res, err)
	}
}

// capturedBody is a captured event body (the webhook body envelope).
var capturedBody = `{"causation":{"hop":0,"root":"0b9d3a3e-8c1e-4f7a-9f59-7a1f7f0b8a10"},"data":{"entity":"child","packageRevision":"sha256:` + zeros + `","recordId":"c-1","revision":3,"trigger":"patched","values":{"phone":"1"}},"dataschema":"urn:engine:event-schema:csr:child:phone_changed:sha256:` + zeros + `","id":"0b9d3a3e-8c1e-4f7a-9f59-7a1f7f0b8a10","source":"urn:engine:registry:csr:instance:a","subject":{"recordReference":"hmac-sha256:` + zeros + `","recordRevision":3},"time":"2026-11-22T00:00:00.000Z","type":"child.phone_changed"}`

const zeros = "0000000000000000000000000000000000000000000000000000000000000000"

// detail returns the private cause of a plugin failure, for test messages.
func detail(err error) error {
	var f *plugins.Failure
	if errors.As(err, &f) {
		return f.Detail()
	}
	return nil
}

// TestConcurrentCalls runs the example planner from many goroutines at once
// in both engines: every call gets the same plan.
func TestConcurrentCalls(t *testing.T) {
	ctx := context.Background()
	runWASM, runTengo := planners(t, plugins.Config{PoolSize: 2})
	input := []byte(`{"request":` + plannerCases[0].request + `}`)
	want, err := canonjson.Transform([]byte(plannerCases[0].want))
	if err != nil {
		t.Fatal(err)
	}
	errs := make(chan error, 16)
	for g := range 8 {
		run := runWASM
		if g%2 == 1 {
			run = runTengo
		}
		go func() {
			for range 10 {
				got, err := run(ctx, input)
				if err == nil && !bytes.Equal(got, want) {
					err = errors.New("plan differs: " + string(got))
				}
				if err != nil {
					errs <- err
					return
				}
			}
			errs <- nil
		}()
	}
	for range 8 {
		if err := <-errs; err != nil {
			t.Fatal(err)
		}
	}
}
