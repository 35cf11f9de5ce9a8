package metadata

import (
	"context"
	"encoding/json"
	"strings"
	"testing"

	"github.com/registrum/registrum/host/access"
	"github.com/registrum/registrum/host/problem"
	"github.com/registrum/registrum/model"
)

// grantsDecider grants, per entity, every listed operation with the listed
// readable fields; anonymous marks every grant anonymous.
type grantsDecider struct {
	readable  map[string][]string // entity id → readable field ids; absent: nothing granted
	request   []string            // readableRequestFields of request entities
	anonymous bool
}

func (d grantsDecider) Decide(_ context.Context, r access.Request) (*access.Grant, error) {
	fields, ok := d.readable[r.Entity.ID]
	if !ok {
		return nil, problem.NotFound()
	}
	if !r.Entity.IsRequestEntity() && strings.HasSuffix(r.Operation, "_request") {
		return nil, problem.NotFound()
	}
	return &access.Grant{Profile: "p", Anonymous: d.anonymous, Readable: access.NewFieldSet(fields...),
		Source: &model.Grant{Entity: r.Entity.ID, ReadableRequestFields: d.request}}, nil
}

func field(id string, t model.FieldType, target string) *model.Field {
	return &model.Field{ID: id, APIName: strings.ReplaceAll(id, "_", "X"), Type: t, Target: target}
}

// capabilityPackage has a guardian and a child, a request entity planned by
// a tengo script (two writes), one planned by WebAssembly, and one with
// declarative effects (a create, and a patch fed by request fields, the
// created record, a literal and a clear).
func capabilityPackage() *model.Package {
	guardian := &model.Entity{ID: "guardian", Route: "guardians", Fields: []*model.Field{
		field("name", model.TypeString, ""), field("relationship", model.TypeString, "")}}
	child := &model.Entity{ID: "child", Route: "children", Fields: []*model.Field{
		field("name", model.TypeString, ""), field("address", model.TypeString, ""), field("phone", model.TypeString, ""),
		field("guardian_id", model.TypeReference, "guardian"), field("case_notes", model.TypeText, "")}}
	requestFields := func() []*model.Field {
		return []*model.Field{field("child_id", model.TypeReference, "child"), field("address", model.TypeString, ""),
			field("guardian_name", model.TypeString, "")}
	}
	writes := []*model.PlannedWrite{
		{ID: "new_guardian", Operation: model.EffectCreate, Target: model.EffectTarget{Entity: "guardian"}, Fields: []string{"name", "relationship"}},
		{ID: "update_child", Operation: model.EffectPatch, Target: model.EffectTarget{Entity: "child", FromField: "child_id"}, Fields: []string{"address", "phone", "guardian_id", "case_notes"}},
	}
	tengo := &model.Entity{ID: "contact_change", Route: "contact-changes", Fields: requestFields(), ChangeRequest: &model.ChangeRequest{
		Planner:     &model.Planner{Engine: "tengo", Module: "planner.contact_change", Writes: writes},
		Review:      model.Review{Mode: model.ReviewAuthority, Authority: "casework", PolicyID: "contact-v1"},
		Application: model.Application{Mode: model.ApplyAutomatic, Executor: "contact-bot", Dispositions: []string{"apply", "queue"}, QueueReasons: []string{"awaiting-check"}},
		Retention:   model.Retention{Mode: model.RetainAll},
	}}
	wasm := &model.Entity{ID: "contact_change_wasm", Route: "contact-changes-wasm", Fields: requestFields(), ChangeRequest: &model.ChangeRequest{
		Planner: &model.Planner{Engine: "wasm", Module: "planner.contact_change_wasm", Writes: writes},
		Review:  model.Review{Mode: model.ReviewNone},
		// Compiled before dispositions were declared: apply alone.
		Application: model.Application{Mode: model.ApplyManual},
		Retention:   model.Retention{Mode: model.RetainAll},
	}}
	declarative := &model.Entity{ID: "address_change", Route: "address-changes", Fields: requestFields(), ChangeRequest: &model.ChangeRequest{
		Effects: []*model.Effect{
			{ID: "open", Operation: model.EffectCreate, Target: model.EffectTarget{Entity: "guardian"},
				Set: []*model.SetField{{Field: "name", FromField: "guardian_name"}, {Field: "relationship", Value: "parent"}}},
			{ID: "move", Operation: model.EffectPatch, Target: model.EffectTarget{Entity: "child", FromField: "child_id"},
				Set:   []*model.SetField{{Field: "address", FromField: "address"}, {Field: "guardian_id", FromEffect: "open"}, {Field: "phone", Value: "none"}},
				Clear: []string{"case_notes"}},
		},
		Review:      model.Review{Mode: model.ReviewNone},
		Application: model.Application{Mode: model.ApplyManual, Dispositions: []string{"apply"}},
		Retention:   model.Retention{Mode: model.OperatorErase},
	}}
	return &model.Package{Entities: []*model.Entity{guardian, child, tengo, wasm, declarative}}
}

// registryOf builds the registry document for the decider and decodes it.
func registryOf(t *testing.T, d access.Decider) map[string]map[string]any {
	t.Helper()
	b, err := Registry(context.Background(), capabilityPackage(), d, access.Request{})
	if err != nil {
		t.Fatal(err)
	}
	var doc struct {
		Entities []map[string]any `json:"entities"`
	}
	if err := json.Unmarshal(b, &doc); err != nil {
		t.Fatal(err)
	}
	out := map[string]map[string]any{}
	for _, e := range doc.Entities {
		out[e["id"].(string)] = e
	}
	return out
}

// canon re-encodes a JSON text with its members in the order compact writes them.
func canon(t *testing.T, text string) string {
	t.Helper()
	var v any
	if err := json.Unmarshal([]byte(text), &v); err != nil {
		t.Fatalf("%v: %s", err, text)
	}
	return compact(t, v)
}

func compact(t *testing.T, v any) string {
	t.Helper()
	b, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

var everything = map[string][]string{
	"guardian":            {"name", "relationship"},
	"child":               {"name", "address", "phone", "guardian_id", "case_notes"},
	"contact_change":      {"child_id", "address", "guardian_name"},
	"contact_change_wasm": {"child_id", "address", "guardian_name"},
	"address_change":      {"child_id", "address", "guardian_name"},
}

// TestCapabilityWhenAllIsReadable: every member, for each planner kind.
func TestCapabilityWhenAllIsReadable(t *testing.T) {
	doc := registryOf(t, grantsDecider{readable: everything, request: []string{"review_state"}})
	limits := `{"wallTimeMilliseconds":500,"maximumInputBytes":1048576,"maximumOutputBytes":1048576`
	writes := `[{"id":"new_guardian","operation":"create","target":{"entity":"guardian"},"fields":["name","relationship"]},` +
		`{"id":"update_child","operation":"patch","target":{"entity":"child","fromField":"child_id"},"fields":["address","phone","guardian_id","case_notes"]}]`
	writeFields := `[{"entity":"guardian","id":"name","apiName":"name"},{"entity":"guardian","id":"relationship","apiName":"relationship"},` +
		`{"entity":"child","id":"address","apiName":"address"},{"entity":"child","id":"phone","apiName":"phone"},` +
		`{"entity":"child","id":"guardian_id","apiName":"guardianXid"},{"entity":"child","id":"case_notes","apiName":"caseXnotes"},` +
		`{"entity":"%s","id":"child_id","apiName":"childXid"}]`
	want := map[string]string{
		"contact_change": `{"planner":{"kind":"tengo","abi":"registrum.change-request-plan/v1","limits":` + limits + `,"maximumAllocations":200000},"possibleWriteCount":2,"writes":` + writes + `},` +
			`"review":{"mode":"authority","authority":"casework","policyId":"contact-v1"},` +
			`"application":{"mode":"automatic","executor":"contact-bot","dispositions":["apply","queue"],"queueReasons":["awaiting-check"]},` +
			`"retention":{"mode":"retain"},"effects":[],"fields":` + strings.Replace(writeFields, "%s", "contact_change", 1) + `}`,
		"contact_change_wasm": `{"planner":{"kind":"wasm","abi":"registrum.change-request-plan/v1","limits":{"wallTimeMilliseconds":500,"memoryPages":512,"maximumInputBytes":1048576,"maximumOutputBytes":1048576},"possibleWriteCount":2,"writes":` + writes + `},` +
			`"review":{"mode":"none"},"application":{"mode":"manual","executor":null,"dispositions":["apply"],"queueReasons":[]},` +
			`"retention":{"mode":"retain"},"effects":[],"fields":` + strings.Replace(writeFields, "%s", "contact_change_wasm", 1) + `}`,
		"address_change": `{"planner":{"kind":"declarative","abi":null,"limits":null,"possibleWriteCount":null,"writes":[]},` +
			`"review":{"mode":"none"},"application":{"mode":"manual","executor":null,"dispositions":["apply"],"queueReasons":[]},"retention":{"mode":"operator-erase"},` +
			`"effects":[{"id":"open","operation":"create","target":{"entity":"guardian"},"set":[{"field":"name","fromField":"guardian_name"},{"field":"relationship","value":"parent"}],"clear":[]},` +
			`{"id":"move","operation":"patch","target":{"entity":"child","fromField":"child_id"},"set":[{"field":"address","fromField":"address"},{"field":"guardian_id","fromEffect":"open"},{"field":"phone","value":"none"}],"clear":["case_notes"]}],` +
			`"fields":[{"entity":"guardian","id":"name","apiName":"name"},{"entity":"guardian","id":"relationship","apiName":"relationship"},` +
			`{"entity":"child","id":"address","apiName":"address"},{"entity":"child","id":"phone","apiName":"phone"},{"entity":"child","id":"guardian_id","apiName":"guardianXid"},{"entity":"child","id":"case_notes","apiName":"caseXnotes"},` +
			`{"entity":"address_change","id":"child_id","apiName":"childXid"},{"entity":"address_change","id":"address","apiName":"address"},{"entity":"address_change","id":"guardian_name","apiName":"guardianXname"}]}`,
	}
	for id, w := range want {
		if got := compact(t, doc[id]["changeRequest"]); got != canon(t, w) {
			t.Errorf("%s: changeRequest =\n%s\nwant\n%s", id, got, w)
		}
	}
	for _, id := range []string{"guardian", "child"} {
		if _, ok := doc[id]["changeRequest"]; ok {
			t.Errorf("%s has a changeRequest capability", id)
		}
	}
}

// TestCapabilityIsFilteredButCountsEveryWrite: writes and effects on an
// entity the caller may not use, unreadable target fields, request-field
// sources and selectors the caller cannot read, and values from a left-out
// effect are left out; possibleWriteCount still counts every write.
func TestCapabilityIsFilteredButCountsEveryWrite(t *testing.T) {
	doc := registryOf(t, grantsDecider{readable: map[string][]string{
		// no guardian at all; child without case_notes
		"child":               {"name", "address", "phone", "guardian_id"},
		"contact_change":      {"child_id", "address"},
		"contact_change_wasm": {"address"}, // the target selector is unreadable
		"address_change":      {"child_id", "address"},
	}})
	capOf := func(id string) map[string]any { return doc[id]["changeRequest"].(map[string]any) }

	pl := capOf("contact_change")["planner"].(map[string]any)
	if got := compact(t, pl["writes"]); got != canon(t, `[{"id":"update_child","operation":"patch","target":{"entity":"child","fromField":"child_id"},"fields":["address","phone","guardian_id"]}]`) {
		t.Errorf("tengo writes = %s", got)
	}
	if pl["possibleWriteCount"] != 2.0 {
		t.Errorf("tengo possibleWriteCount = %v, want 2", pl["possibleWriteCount"])
	}
	pl = capOf("contact_change_wasm")["planner"].(map[string]any)
	if got := compact(t, pl["writes"]); got != canon(t, `[]`) || pl["possibleWriteCount"] != 2.0 {
		t.Errorf("wasm writes = %s, possibleWriteCount %v; want [] and 2", got, pl["possibleWriteCount"])
	}
	if got := compact(t, capOf("contact_change_wasm")["fields"]); got != canon(t, `[]`) {
		t.Errorf("wasm fields = %s, want []", got)
	}

	// The create on guardian is gone, and with it the guardian_id fed by
	// it; case_notes is unreadable; guardian_name is not readable.
	if got := compact(t, capOf("address_change")["effects"]); got != canon(t, `[{"id":"move","operation":"patch","target":{"entity":"child","fromField":"child_id"},"set":[{"field":"address","fromField":"address"},{"field":"phone","value":"none"}],"clear":[]}]`) {
		t.Errorf("declarative effects = %s", got)
	}
	if got := compact(t, capOf("address_change")["fields"]); got != canon(t, `[{"entity":"child","id":"address","apiName":"address"},{"entity":"child","id":"phone","apiName":"phone"},{"entity":"address_change","id":"child_id","apiName":"childXid"},{"entity":"address_change","id":"address","apiName":"address"}]`) {
		t.Errorf("declarative fields = %s", got)
	}
	if _, ok := doc["guardian"]; ok {
		t.Error("guardian listed for a caller with no grant on it")
	}

	// A request field the caller cannot read leaves out the set it feeds.
	doc = registryOf(t, grantsDecider{readable: map[string][]string{
		"guardian": {"name", "relationship"}, "child": {"address"}, "address_change": {"guardian_name"},
	}})
	if got := compact(t, doc["address_change"]["changeRequest"].(map[string]any)["effects"]); got != canon(t, `[{"id":"open","operation":"create","target":{"entity":"guardian"},"set":[{"field":"name","fromField":"guardian_name"},{"field":"relationship","value":"parent"}],"clear":[]}]`) {
		t.Errorf("effects without child_id = %s", got)
	}
}

// TestReadableRequestFields: listed per operation for a request entity and
// a non-anonymous profile; none for an anonymous one or a plain entity.
func TestReadableRequestFields(t *testing.T) {
	for _, tc := range []struct {
		anonymous bool
		entity    string
		want      string
	}{
		{false, "contact_change", `["review_state","actor_reference"]`},
		{true, "contact_change", `[]`},
		{false, "child", `[]`},
	} {
		doc := registryOf(t, grantsDecider{readable: everything, request: []string{"review_state", "actor_reference"}, anonymous: tc.anonymous})
		ops := doc[tc.entity]["operations"].([]any)
		if len(ops) == 0 {
			t.Fatalf("%s: no operations", tc.entity)
		}
		for _, op := range ops {
			o := op.(map[string]any)
			if got := compact(t, o["readableRequestFields"]); got != tc.want {
				t.Errorf("anonymous %v, %s %s: readableRequestFields = %s, want %s", tc.anonymous, tc.entity, o["operation"], got, tc.want)
			}
		}
	}
}

func TestAllowedDispositionsDefault(t *testing.T) {
	if got := (model.Application{}).AllowedDispositions(); len(got) != 1 || got[0] != model.DispositionApply {
		t.Errorf("AllowedDispositions() = %v, want [apply]", got)
	}
}
