package childsupport_test

import (
	"bytes"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/registrum/registrum/examples/plugins/planner/plan"
	"github.com/registrum/registrum/model"
	"github.com/registrum/registrum/plugins"
)

// plannerScript is the example planner as the registry pins it; the plugins
// example (../plugins/planner/planner.tengo) is the same file, byte for byte.
const plannerScript = "scripts/child-details-change.tengo"

// TestPlannerIsTheExamplePlanner holds the one source of the example
// planner: the script the registry pins is ../plugins/planner/planner.tengo
// exactly (whose Go forms, plan.Plan and plan.PlanFast, the plugins tests
// hold byte-identical to it), and the writes the registry declares for it
// are plan.Writes.
func TestPlannerIsTheExamplePlanner(t *testing.T) {
	mine, err := os.ReadFile(plannerScript)
	if err != nil {
		t.Fatal(err)
	}
	theirs, err := os.ReadFile(filepath.Join("..", "plugins", "planner", "planner.tengo"))
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(mine, theirs) {
		t.Fatalf("%s differs from ../plugins/planner/planner.tengo: change both (cp one onto the other) and the pinned sha256 in registry.yaml", plannerScript)
	}

	_, p := compile(t)
	e := p.EntityByID("child-details-change")
	if e == nil || !e.IsRequestEntity() || e.ChangeRequest.Planner == nil {
		t.Fatal("child-details-change is not a request entity with a planner")
	}
	cr := e.ChangeRequest
	if cr.Planner.Engine != "tengo" || cr.Review.Mode != model.ReviewNone || cr.Application.Mode != model.ApplyManual {
		t.Fatalf("planner %+v, review %+v, application %+v", cr.Planner, cr.Review, cr.Application)
	}
	m := p.ModuleByID(cr.Planner.Module)
	if m == nil || m.Kind != model.KindPlanner || !strings.HasSuffix(m.Path, filepath.Base(plannerScript)) {
		t.Fatalf("planner module %+v", m)
	}
	declared := map[string][]string{}
	for _, w := range cr.Planner.Writes {
		entity := w.Target.Entity
		if entity == "" && w.Target.FromField != "" {
			entity = e.Field(w.Target.FromField).Target
		}
		declared[entity+" "+w.Operation] = w.Fields
	}
	if len(declared) != len(plan.Writes) {
		t.Fatalf("declared writes %v, plan.Writes %+v", declared, plan.Writes)
	}
	for _, w := range plan.Writes {
		got := declared[w.Entity+" "+string(w.Operation)]
		if !slices.Equal(slices.Sorted(slices.Values(got)), slices.Sorted(slices.Values(w.Fields))) {
			t.Errorf("%s %s: the registry declares fields %v, the planner writes %v", w.Operation, w.Entity, got, w.Fields)
		}
		target := p.EntityByID(w.Entity)
		for _, f := range w.Fields {
			if target == nil || target.Field(f) == nil {
				t.Errorf("the planner writes %s.%s, which the registry does not declare", w.Entity, f)
			}
		}
	}
	if ref := p.EntityByID("child").Field("guardian_id"); ref == nil || ref.Type != model.TypeReference || ref.Target != "guardian" {
		t.Errorf("child.guardian_id = %+v, want a reference to guardian", ref)
	}
}

// TestPlannerRunsInTheSandbox runs the pinned script in the plugin host's
// tengo sandbox: a change with a new guardian plans the guardian's create
// and the child's patch; a request naming no child is refused by kind.
func TestPlannerRunsInTheSandbox(t *testing.T) {
	in := `{"request":{"child_id":"0b6d7c8e-1f2a-4b3c-8d4e-5f6a7b8c9d0e","address":"New Street 2","phone":"555-02 03","notes":"moved","guardian":{"name":"Grace","relationship":"aunt"}}}`
	out, err := plugins.RunFile(t.Context(), plugins.Config{}, model.EngineTengo, model.KindPlanner, plannerScript, []byte(in))
	if err != nil {
		t.Fatal(err)
	}
	want := `{"effects":[{"id":"new_guardian","operation":"create","set":{"name":{"value":"Grace"},"relationship":{"value":"aunt"}},"target":{"entity":"guardian"}},` +
		`{"id":"update_child","operation":"patch","set":{"address":{"fromField":"address"},"case_notes":{"fromField":"notes"},"guardian_id":{"fromEffect":"new_guardian"},"phone":{"value":"5550203"}},"target":{"entity":"child","fromField":"child_id"}}]}`
	if string(out) != want {
		t.Errorf("plan\n got %s\nwant %s", out, want)
	}
	out, err = plugins.RunFile(t.Context(), plugins.Config{}, model.EngineTengo, model.KindPlanner, plannerScript, []byte(`{"request":{"address":"x"}}`))
	if err != nil || string(out) != `{"refusal":{"kind":"child_missing"}}` {
		t.Errorf("no child: %s %v", out, err)
	}
}
