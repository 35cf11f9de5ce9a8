package planners_test

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/registrum/registrum/internal/canonjson"
	"github.com/registrum/registrum/model"
	"github.com/registrum/registrum/planners"
	"github.com/registrum/registrum/plugins"
	"github.com/registrum/registrum/plugins/contract"
)

// Record ids the tests put in request fields.
const (
	personID = "0190b5a4-6f1e-7c3a-9d2b-4e5f6a7b8c9d"
	otherID  = "0190b5a4-6f1e-7c3a-9d2b-000000000002"
)

func intp(v int) *int       { return &v }
func int64p(v int64) *int64 { return &v }

// registry returns a package with two target entities (household, person)
// and the request entity "application" carrying cr. The request entity's
// fields are what the tests' requests submit: a person to patch, a name, an
// age and, for script planners, the plan the script echoes.
func registry(cr *model.ChangeRequest) *model.Package {
	return &model.Package{
		Format:   model.Format,
		Registry: model.Registry{ID: "test"},
		Entities: []*model.Entity{
			{ID: "household", Route: "households", MutationMode: model.Mutable, Fields: []*model.Field{
				{ID: "name", APIName: "name", Type: model.TypeString, Required: true, MaxLength: intp(40)},
				{ID: "size", APIName: "size", Type: model.TypeInteger, Minimum: int64p(1), Maximum: int64p(20)},
			}},
			{ID: "person", Route: "persons", MutationMode: model.Mutable, Fields: []*model.Field{
				{ID: "name", APIName: "name", Type: model.TypeString, Required: true, MaxLength: intp(40)},
				{ID: "age", APIName: "age", Type: model.TypeInteger, Minimum: int64p(0), Maximum: int64p(150)},
				{ID: "household", APIName: "household", Type: model.TypeReference, Target: "household"},
				{ID: "status", APIName: "status", Type: model.TypeCode, Values: []string{"active", "inactive"}},
				{ID: "note", APIName: "note", Type: model.TypeText},
			}},
			{ID: "application", Route: "applications", MutationMode: model.Mutable, ChangeRequest: cr, Fields: []*model.Field{
				{ID: "person", APIName: "person", Type: model.TypeReference, Target: "person"},
				{ID: "name", APIName: "name", Type: model.TypeString},
				{ID: "age", APIName: "age", Type: model.TypeInteger},
				{ID: "plan", APIName: "plan", Type: model.TypeText},
			}},
		},
	}
}

// declarativePlanner returns the planner of a request entity whose project
// declares effects.
func declarativePlanner(t *testing.T, effects ...*model.Effect) planners.Planner {
	t.Helper()
	pkg := registry(&model.ChangeRequest{Effects: effects})
	set, err := planners.New(pkg, nil)
	if err != nil {
		t.Fatal(err)
	}
	p := set.For(pkg.EntityByID("application"))
	if p == nil {
		t.Fatal("the request entity has no planner")
	}
	return p
}

// scriptPlanner writes src as a reviewed tengo planner module, loads it
// the way the host does (planners.Modules, then plugins.Runtime.Load with
// its pinned digest) under limits, and returns the request entity's
// planner and the module's digest.
func scriptPlanner(t *testing.T, limits plugins.Limits, src string, writes ...*model.PlannedWrite) (planners.Planner, string) {
	t.Helper()
	ctx := context.Background()
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, "planner.tengo"), []byte(src), 0o600); err != nil {
		t.Fatal(err)
	}
	digest := canonjson.DigestBytes([]byte(src))
	pkg := registry(&model.ChangeRequest{Planner: &model.Planner{Engine: string(model.EngineTengo), Module: "planner", Writes: writes}})
	pkg.Modules = []model.Module{{ID: "planner", Engine: model.EngineTengo, Kind: model.KindPlanner, Path: "planner.tengo", SHA256: digest}}
	rt, err := plugins.NewRuntime(ctx, plugins.Config{Limits: limits})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = rt.Close(ctx) })
	mods, err := rt.Load(ctx, planners.Modules(pkg), dir)
	if err != nil {
		t.Fatal(err)
	}
	set, err := planners.New(pkg, mods)
	if err != nil {
		t.Fatal(err)
	}
	return set.For(pkg.EntityByID("application")), digest
}

// echoScript is a planner that answers the plan its request carries, as
// JSON text in the field "plan": a stand-in for any module's output.
const echoScript = `json := import("json")
output = json.decode(input.request.plan)`

// echoWrites are the writes the echo planner declares. Two of them name
// targets the package refuses (a request entity, an entity it does not
// have) and one a field person does not have, so that the package's own
// checks are reached past the declared writes.
var echoWrites = []*model.PlannedWrite{
	{ID: "new_household", Operation: model.EffectCreate, Target: model.EffectTarget{Entity: "household"}, Fields: []string{"name", "size"}},
	{ID: "new_person", Operation: model.EffectCreate, Target: model.EffectTarget{Entity: "person"}, Fields: []string{"name", "age", "household", "status", "note", "nickname"}},
	{ID: "update_person", Operation: model.EffectPatch, Target: model.EffectTarget{Entity: "person", FromField: "person"}, Fields: []string{"name", "status", "note", "age"}},
	{ID: "new_application", Operation: model.EffectCreate, Target: model.EffectTarget{Entity: "application"}, Fields: []string{"plan"}},
	{ID: "new_ghost", Operation: model.EffectCreate, Target: model.EffectTarget{Entity: "ghost"}, Fields: []string{"name"}},
}

// generous is a wall-time limit far above what any script but an endless
// loop needs, so a busy machine never turns another failure into a timeout.
var generous = plugins.Limits{WallTime: 30 * time.Second}

// requireRefusal fails t unless err is a *planners.Refusal of kind want, and
// returns it.
func requireRefusal(t *testing.T, plan *planners.Plan, err error, want string) *planners.Refusal {
	t.Helper()
	var r *planners.Refusal
	if !errors.As(err, &r) {
		t.Fatalf("err = %v (plan %+v), want a refusal %s", err, plan, want)
	}
	if r.Kind != want {
		t.Fatalf("refusal kind %q (%v), want %q", r.Kind, r.Cause, want)
	}
	if plan != nil {
		t.Fatalf("a refusal came with a plan: %+v", plan)
	}
	return r
}

// A script planner's effects become writes: literal values checked and put
// in wire form, request fields read, the patch target resolved to the
// record id its request field holds, references to earlier creates kept as
// fromEffect; the plan carries the module's kind and pinned digest.
func TestScriptPlannerResolvesItsEffectsIntoWrites(t *testing.T) {
	p, digest := scriptPlanner(t, generous, echoScript, echoWrites...)
	if p.Kind() != planners.KindTengo {
		t.Fatalf("kind %q", p.Kind())
	}
	plan, err := p.Plan(context.Background(), planners.Input{RequestID: otherID, ProposalVersion: 3, Fields: map[string]any{
		"person": personID, "name": "Ada", "age": int64(41),
		"plan": `{"effects": [
			{"id": "hh", "operation": "create", "target": {"entity": "household"}, "set": {"name": {"value": "Lind"}, "size": {"value": 3}}},
			{"id": "kid", "operation": "create", "target": {"entity": "person"},
			 "set": {"name": {"fromField": "name"}, "age": {"fromField": "age"}, "household": {"fromEffect": "hh"}}},
			{"id": "old", "operation": "patch", "target": {"entity": "person", "fromField": "person"},
			 "set": {"status": {"value": "inactive"}}, "clear": ["note"]}
		]}`,
	}})
	if err != nil {
		t.Fatal(err)
	}
	if plan.Kind != planners.KindTengo || plan.ModuleDigest != digest || plan.ProposalVersion != 3 {
		t.Fatalf("plan kind %q digest %q proposal %d", plan.Kind, plan.ModuleDigest, plan.ProposalVersion)
	}
	if len(plan.Writes) != 3 {
		t.Fatalf("writes %+v", plan.Writes)
	}
	hh, kid, old := plan.Writes[0], plan.Writes[1], plan.Writes[2]
	if hh.ID != "hh" || hh.Operation != model.EffectCreate || hh.Target != (planners.Target{Entity: "household"}) ||
		hh.Set["name"].Value != "Lind" || hh.Set["size"].Value != int64(3) {
		t.Errorf("household write %+v", hh)
	}
	if kid.Set["name"].Value != "Ada" || kid.Set["age"].Value != int64(41) || kid.Set["household"] != (planners.Value{FromEffect: "hh"}) {
		t.Errorf("person write %+v", kid)
	}
	if old.Operation != model.EffectPatch || old.Target != (planners.Target{Entity: "person", RecordID: personID}) ||
		old.Set["status"].Value != "inactive" || len(old.Clear) != 1 || old.Clear[0] != "note" {
		t.Errorf("patch write %+v", old)
	}
	for _, w := range plan.Writes {
		if w.ExpectedRevision != 0 {
			t.Errorf("write %s expects revision %d before the host filled it in", w.ID, w.ExpectedRevision)
		}
	}
	if plan.Canonical != nil || plan.EffectDigest != "" {
		t.Error("Plan froze the plan: only Freeze may")
	}
}

// What a module answers is checked twice: the plugin contract and the
// declared writes (a breach is the module's failure: ceiling_exceeded),
// then the package itself (targets, fields, value types, required fields,
// record ids: invalid_plan).
func TestScriptPlannerRefusesPlansThePackageOrItsDeclaredWritesDoNotAllow(t *testing.T) {
	p, _ := scriptPlanner(t, generous, echoScript, echoWrites...)
	for _, tc := range []struct {
		name, plan string
		fields     map[string]any
		want       string
		// detail is what the plugin failure's private detail says, for a
		// refusal by the plugin contract.
		detail string
	}{
		{"a patch outside the declared writes",
			`{"effects": [{"id": "x", "operation": "patch", "target": {"entity": "household", "fromField": "person"}, "set": {"name": {"value": "X"}}}]}`,
			nil, planners.RefusedCeiling, "outside the planner's declared writes"},
		{"a field outside the declared write",
			`{"effects": [{"id": "x", "operation": "create", "target": {"entity": "household"}, "set": {"name": {"value": "X"}, "owner": {"value": "Y"}}}]}`,
			nil, planners.RefusedCeiling, "outside the planner's declared writes"},
		{"no effect and no refusal", `{"effects": []}`, nil, planners.RefusedCeiling, "neither effects nor refusal"},
		{"a reference to no earlier create",
			`{"effects": [{"id": "x", "operation": "create", "target": {"entity": "person"}, "set": {"name": {"value": "X"}, "household": {"fromEffect": "later"}}}]}`,
			nil, planners.RefusedCeiling, "is not an earlier create effect"},
		{"a member the contract does not know",
			`{"effects": [{"id": "x", "operation": "create", "target": {"entity": "household"}, "set": {"name": {"value": "X"}}}], "debug": "x"}`,
			nil, planners.RefusedCeiling, "debug"},
		{"an entity the package does not have",
			`{"effects": [{"id": "x", "operation": "create", "target": {"entity": "ghost"}, "set": {"name": {"value": "X"}}}]}`,
			nil, planners.RefusedInvalid, ""},
		{"a request entity as target",
			`{"effects": [{"id": "x", "operation": "create", "target": {"entity": "application"}, "set": {"plan": {"value": "X"}}}]}`,
			nil, planners.RefusedInvalid, ""},
		{"a field the target does not have",
			`{"effects": [{"id": "x", "operation": "create", "target": {"entity": "person"}, "set": {"name": {"value": "X"}, "nickname": {"value": "Y"}}}]}`,
			nil, planners.RefusedInvalid, ""},
		{"a value of the wrong type",
			`{"effects": [{"id": "x", "operation": "create", "target": {"entity": "person"}, "set": {"name": {"value": "X"}, "age": {"value": "old"}}}]}`,
			nil, planners.RefusedInvalid, ""},
		{"a value out of the field's bounds",
			`{"effects": [{"id": "x", "operation": "create", "target": {"entity": "person"}, "set": {"name": {"value": "X"}, "age": {"value": 151}}}]}`,
			nil, planners.RefusedInvalid, ""},
		{"a code outside the vocabulary",
			`{"effects": [{"id": "x", "operation": "create", "target": {"entity": "person"}, "set": {"name": {"value": "X"}, "status": {"value": "deceased"}}}]}`,
			nil, planners.RefusedInvalid, ""},
		{"a request field of the wrong type",
			`{"effects": [{"id": "x", "operation": "create", "target": {"entity": "person"}, "set": {"name": {"fromField": "age"}}}]}`,
			map[string]any{"age": int64(7)}, planners.RefusedInvalid, ""},
		{"a create without a required field",
			`{"effects": [{"id": "x", "operation": "create", "target": {"entity": "person"}, "set": {"age": {"value": 30}}}]}`,
			nil, planners.RefusedInvalid, ""},
		{"a required field set to null",
			`{"effects": [{"id": "x", "operation": "create", "target": {"entity": "person"}, "set": {"name": {"value": null}}}]}`,
			nil, planners.RefusedInvalid, ""},
		{"a required field from an absent request field",
			`{"effects": [{"id": "x", "operation": "create", "target": {"entity": "person"}, "set": {"name": {"fromField": "name"}}}]}`,
			nil, planners.RefusedInvalid, ""},
		{"a required field cleared",
			`{"effects": [{"id": "x", "operation": "patch", "target": {"entity": "person", "fromField": "person"}, "clear": ["name"]}]}`,
			map[string]any{"person": personID}, planners.RefusedInvalid, ""},
		{"a patch target field holding no record id",
			`{"effects": [{"id": "x", "operation": "patch", "target": {"entity": "person", "fromField": "person"}, "set": {"status": {"value": "active"}}}]}`,
			map[string]any{"person": "Ada"}, planners.RefusedInvalid, ""},
		{"a patch target field left empty",
			`{"effects": [{"id": "x", "operation": "patch", "target": {"entity": "person", "fromField": "person"}, "set": {"status": {"value": "active"}}}]}`,
			nil, planners.RefusedInvalid, ""},
		{"a patch target id in upper case",
			`{"effects": [{"id": "x", "operation": "patch", "target": {"entity": "person", "fromField": "person"}, "set": {"status": {"value": "active"}}}]}`,
			map[string]any{"person": strings.ToUpper(personID)}, planners.RefusedInvalid, ""},
		{"an earlier create's id in a field that is not a reference",
			`{"effects": [{"id": "hh", "operation": "create", "target": {"entity": "household"}, "set": {"name": {"value": "X"}}},
			              {"id": "x", "operation": "create", "target": {"entity": "person"}, "set": {"name": {"fromEffect": "hh"}}}]}`,
			nil, planners.RefusedInvalid, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			fields := map[string]any{"plan": tc.plan}
			for k, v := range tc.fields {
				fields[k] = v
			}
			plan, err := p.Plan(context.Background(), planners.Input{ProposalVersion: 1, Fields: fields})
			r := requireRefusal(t, plan, err, tc.want)
			var f *plugins.Failure
			switch {
			case tc.detail == "" && errors.As(r.Cause, &f):
				t.Fatalf("refused by the plugin runtime (%v), not by the package", f.Detail())
			case tc.detail != "" && (!errors.As(r.Cause, &f) || !strings.Contains(f.Detail().Error(), tc.detail)):
				t.Fatalf("cause %v, want a plugin failure saying %q", r.Cause, tc.detail)
			}
		})
	}
}

// Declarative effects are checked by the same rules as a module's: a
// project's effects that name no write, or a write the package does not
// allow, yield no plan.
func TestDeclarativePlannerRefusesEffectsThePackageDoesNotAllow(t *testing.T) {
	name := &model.SetField{Field: "name", Value: "Ada"}
	for _, tc := range []struct {
		name    string
		effects []*model.Effect
		want    string
	}{
		{"no effect", nil, planners.RefusedEmpty},
		{"a create without an id",
			[]*model.Effect{{Operation: model.EffectCreate, Target: model.EffectTarget{Entity: "person"}, Set: []*model.SetField{name}}},
			planners.RefusedInvalid},
		{"a patch that names no target",
			[]*model.Effect{{ID: "x", Operation: model.EffectPatch, Target: model.EffectTarget{Entity: "person"}, Set: []*model.SetField{name}}},
			planners.RefusedInvalid},
		{"a patch of a record no earlier effect created",
			[]*model.Effect{{ID: "x", Operation: model.EffectPatch, Target: model.EffectTarget{Entity: "person", FromEffect: "y"}, Set: []*model.SetField{name}}},
			planners.RefusedInvalid},
		{"an operation that is neither create nor patch",
			[]*model.Effect{{ID: "x", Operation: "delete", Target: model.EffectTarget{Entity: "person", FromField: "person"}}},
			planners.RefusedInvalid},
		{"a field both set and cleared",
			[]*model.Effect{{ID: "x", Operation: model.EffectPatch, Target: model.EffectTarget{Entity: "person", FromField: "person"},
				Set: []*model.SetField{{Field: "note", Value: "n"}}, Clear: []string{"note"}}},
			planners.RefusedInvalid},
		{"a field the target does not have cleared",
			[]*model.Effect{{ID: "x", Operation: model.EffectPatch, Target: model.EffectTarget{Entity: "person", FromField: "person"}, Clear: []string{"nickname"}}},
			planners.RefusedInvalid},
		{"a literal of the wrong type",
			[]*model.Effect{{ID: "x", Operation: model.EffectCreate, Target: model.EffectTarget{Entity: "person"},
				Set: []*model.SetField{name, {Field: "age", Value: "forty"}}}},
			planners.RefusedInvalid},
		{"a later effect's record as a reference",
			[]*model.Effect{
				{ID: "x", Operation: model.EffectCreate, Target: model.EffectTarget{Entity: "person"}, Set: []*model.SetField{name, {Field: "household", FromEffect: "hh"}}},
				{ID: "hh", Operation: model.EffectCreate, Target: model.EffectTarget{Entity: "household"}, Set: []*model.SetField{{Field: "name", Value: "Lind"}}},
			},
			planners.RefusedInvalid},
	} {
		t.Run(tc.name, func(t *testing.T) {
			p := declarativePlanner(t, tc.effects...)
			plan, err := p.Plan(context.Background(), planners.Input{ProposalVersion: 1, Fields: map[string]any{"person": personID}})
			requireRefusal(t, plan, err, tc.want)
		})
	}
}

// A declarative plan has no module digest, and its literal values are put
// in the wire form the value checker answers.
func TestDeclarativePlannerPlansTheProjectsEffects(t *testing.T) {
	p := declarativePlanner(t,
		&model.Effect{ID: "hh", Operation: model.EffectCreate, Target: model.EffectTarget{Entity: "household"},
			Set: []*model.SetField{{Field: "name", FromField: "name"}, {Field: "size", Value: 2}}},
		&model.Effect{ID: "move", Operation: model.EffectPatch, Target: model.EffectTarget{Entity: "person", FromField: "person"},
			Set: []*model.SetField{{Field: "household", FromEffect: "hh"}}, Clear: []string{"note"}},
	)
	if p.Kind() != planners.KindDeclarative {
		t.Fatalf("kind %q", p.Kind())
	}
	plan, err := p.Plan(context.Background(), planners.Input{ProposalVersion: 2, Fields: map[string]any{"name": "Lind", "person": personID}})
	if err != nil {
		t.Fatal(err)
	}
	if plan.Kind != planners.KindDeclarative || plan.ModuleDigest != "" || plan.ProposalVersion != 2 || len(plan.Writes) != 2 {
		t.Fatalf("plan %+v", plan)
	}
	hh, move := plan.Writes[0], plan.Writes[1]
	if hh.Set["name"].Value != "Lind" || hh.Set["size"].Value != int64(2) {
		t.Errorf("household write %+v", hh)
	}
	if move.Target.RecordID != personID || move.Set["household"].FromEffect != "hh" || len(move.Clear) != 1 {
		t.Errorf("patch write %+v", move)
	}
}

// How a module's failure reaches the caller: a timeout is ErrDeadline (the
// client may retry), a crash planner_failed, every other failure of the
// module or its call ceiling_exceeded; the plugin failure stays the cause,
// for the operator's log.
func TestScriptFailuresMapToThePlannersErrors(t *testing.T) {
	for _, tc := range []struct {
		name    string
		limits  plugins.Limits
		src     string
		request map[string]any
		want    string // a refusal kind, or "deadline"
		cause   plugins.FailureKind
	}{
		{"an endless loop", plugins.Limits{WallTime: 100 * time.Millisecond}, `for {}`, nil, "deadline", plugins.FailureTimeout},
		{"a runtime error", generous, `x := 1; output = x.y.z`, nil, planners.RefusedFailed, plugins.FailureTrap},
		{"an allocation bomb", plugins.Limits{WallTime: generous.WallTime, MaxAllocs: 5000}, `a := []; for { a = append(a, {x: 1}) }`, nil,
			planners.RefusedCeiling, plugins.FailureMemory},
		{"no output", generous, `x := 1`, nil, planners.RefusedCeiling, plugins.FailureInvalidOutput},
		{"an output that is not a plan", generous, `output = {effects: "all"}`, nil, planners.RefusedCeiling, plugins.FailureInvalidOutput},
		{"an output over the byte limit", plugins.Limits{WallTime: generous.WallTime, MaxOutputBytes: 64},
			`text := import("text"); output = {refusal: {kind: text.repeat("x", 100)}}`, nil, planners.RefusedCeiling, plugins.FailureInvalidOutput},
		{"a request over the input limit", plugins.Limits{WallTime: generous.WallTime, MaxInputBytes: 64},
			`output = {refusal: {kind: "never_run"}}`, map[string]any{"name": strings.Repeat("x", 100)}, planners.RefusedCeiling, plugins.FailureRefused},
	} {
		t.Run(tc.name, func(t *testing.T) {
			p, _ := scriptPlanner(t, tc.limits, tc.src)
			plan, err := p.Plan(context.Background(), planners.Input{ProposalVersion: 1, Fields: tc.request})
			if tc.want == "deadline" {
				var r *planners.Refusal
				if !errors.Is(err, planners.ErrDeadline) || errors.As(err, &r) || plan != nil {
					t.Fatalf("err = %v, plan %+v: want ErrDeadline and no refusal", err, plan)
				}
			} else {
				r := requireRefusal(t, plan, err, tc.want)
				if errors.Is(err, planners.ErrDeadline) {
					t.Fatal("a refusal is also a deadline")
				}
				err = r.Cause
			}
			if got := plugins.FailureKindOf(err); got != tc.cause {
				t.Fatalf("cause kind %q, want %q (err %v)", got, tc.cause, err)
			}
		})
	}
}

// A planner's own refusal reaches the client as its kind only when the kind
// is a plain lowercase token of at most 64 characters; any other kind the
// contract admits is told as planner_refused and never echoed.
func TestScriptRefusalKindsAreEchoedOnlyWhenSafe(t *testing.T) {
	long := "a" + strings.Repeat("b", 64)
	for _, tc := range []struct{ kind, want string }{
		{"over_quota", "over_quota"},
		{"household_full2", "household_full2"},
		{"Over_Quota", planners.RefusedByPlanner},
		{"over-quota.v2", planners.RefusedByPlanner},
		{long[:64], long[:64]},
		{long, planners.RefusedByPlanner},
	} {
		t.Run(tc.kind, func(t *testing.T) {
			p, _ := scriptPlanner(t, generous, `output = {refusal: {kind: "`+tc.kind+`"}}`)
			plan, err := p.Plan(context.Background(), planners.Input{ProposalVersion: 1})
			r := requireRefusal(t, plan, err, tc.want)
			if tc.want == planners.RefusedByPlanner && strings.Contains(r.Error(), tc.kind) {
				t.Fatalf("the refusal %q repeats the module's kind", r.Error())
			}
		})
	}
}

// A call the caller itself abandoned is no refusal and no deadline: it
// reports the cancellation.
func TestACancelledCallIsNeitherARefusalNorADeadline(t *testing.T) {
	p, _ := scriptPlanner(t, generous, `for {}`)
	ctx, cancel := context.WithCancel(context.Background())
	time.AfterFunc(50*time.Millisecond, cancel)
	plan, err := p.Plan(ctx, planners.Input{ProposalVersion: 1})
	var r *planners.Refusal
	if !errors.Is(err, context.Canceled) || errors.Is(err, planners.ErrDeadline) || errors.As(err, &r) || plan != nil {
		t.Fatalf("err = %v, plan %+v", err, plan)
	}
}

// The caller's own deadline passing during the call is the planner running
// out of time.
func TestTheCallersDeadlineIsAPlannerDeadline(t *testing.T) {
	p, _ := scriptPlanner(t, generous, `for {}`)
	ctx, cancel := context.WithTimeout(context.Background(), 50*time.Millisecond)
	defer cancel()
	_, err := p.Plan(ctx, planners.Input{ProposalVersion: 1})
	if !errors.Is(err, planners.ErrDeadline) {
		t.Fatalf("err = %v, want ErrDeadline", err)
	}
}

// A planner's module missing from the loaded set is an error of the host,
// not a refusal of the request.
func TestAModuleMissingFromTheLoadedSetIsNoRefusal(t *testing.T) {
	ctx := context.Background()
	rt, err := plugins.NewRuntime(ctx, plugins.Config{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = rt.Close(ctx) })
	empty, err := rt.Load(ctx, nil, t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	pkg := registry(&model.ChangeRequest{Planner: &model.Planner{Engine: "tengo", Module: "planner"}})
	pkg.Modules = []model.Module{{ID: "planner", Engine: model.EngineTengo, Kind: model.KindPlanner, Path: "planner.tengo", SHA256: canonjson.DigestBytes(nil)}}
	set, err := planners.New(pkg, empty)
	if err != nil {
		t.Fatal(err)
	}
	_, err = set.For(pkg.EntityByID("application")).Plan(ctx, planners.Input{ProposalVersion: 1})
	var r *planners.Refusal
	if !errors.Is(err, plugins.ErrUnknownModule) || errors.As(err, &r) {
		t.Fatalf("err = %v", err)
	}
}

// New refuses a package whose planner module is not in the package, or not
// loaded; entities that are not request entities have no planner.
func TestNewRefusesPlannersWithoutTheirModule(t *testing.T) {
	scripted := &model.ChangeRequest{Planner: &model.Planner{Engine: "tengo", Module: "planner"}}
	if _, err := planners.New(registry(scripted), nil); err == nil || !strings.Contains(err.Error(), "is not in the package") {
		t.Fatalf("module not in the package: err = %v", err)
	}
	pkg := registry(scripted)
	pkg.Modules = []model.Module{{ID: "planner", Engine: model.EngineTengo, Kind: model.KindPlanner, Path: "p.tengo", SHA256: canonjson.DigestBytes(nil)}}
	if _, err := planners.New(pkg, nil); err == nil || !strings.Contains(err.Error(), "is not loaded") {
		t.Fatalf("module not loaded: err = %v", err)
	}
	decl := registry(&model.ChangeRequest{})
	set, err := planners.New(decl, nil)
	if err != nil {
		t.Fatal(err)
	}
	if set.For(decl.EntityByID("person")) != nil {
		t.Fatal("a target entity has a planner")
	}
}

// Modules gives each planner module the writes its entity declares, in the
// plugin contract's shape; a planner declaring none gets an empty list, so
// the runtime refuses every effect rather than checking none.
func TestModulesCarryTheDeclaredWrites(t *testing.T) {
	pkg := registry(&model.ChangeRequest{Planner: &model.Planner{Engine: "tengo", Module: "planner", Writes: echoWrites[:2]}})
	pkg.Modules = []model.Module{{ID: "planner", Engine: model.EngineTengo, Kind: model.KindPlanner, Path: "p.tengo", SHA256: canonjson.DigestBytes(nil)}}
	mods := planners.Modules(pkg)
	if len(mods) != 1 || mods[0].ID != "planner" || mods[0].SHA256 != pkg.Modules[0].SHA256 {
		t.Fatalf("modules %+v", mods)
	}
	want := []contract.Write{
		{Entity: "household", Operation: contract.OperationCreate, Fields: []string{"name", "size"}},
		{Entity: "person", Operation: contract.OperationCreate, Fields: echoWrites[1].Fields},
	}
	if len(mods[0].Writes) != len(want) {
		t.Fatalf("writes %+v", mods[0].Writes)
	}
	for i, w := range want {
		got := mods[0].Writes[i]
		if got.Entity != w.Entity || got.Operation != w.Operation || strings.Join(got.Fields, ",") != strings.Join(w.Fields, ",") {
			t.Errorf("write %d: %+v, want %+v", i, got, w)
		}
	}

	pkg.EntityByID("application").ChangeRequest.Planner.Writes = nil
	mods = planners.Modules(pkg)
	if mods[0].Writes == nil || len(mods[0].Writes) != 0 {
		t.Fatalf("a planner without declared writes: %#v", mods[0].Writes)
	}
	p, _ := scriptPlanner(t, generous, echoScript)
	plan, err := p.Plan(context.Background(), planners.Input{ProposalVersion: 1, Fields: map[string]any{
		"plan": `{"effects": [{"id": "x", "operation": "create", "target": {"entity": "household"}, "set": {"name": {"value": "X"}}}]}`}})
	requireRefusal(t, plan, err, planners.RefusedCeiling)
}
