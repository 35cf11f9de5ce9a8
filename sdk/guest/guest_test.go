package guest_test

import (
	"testing"

	"github.com/registrum/registrum/sdk/guest"
)

// TestOnePlanner checks registering a planner with one API replaces one
// registered with the other (a module has one planner), and that a bad input
// gets the error output without the fast planner being called.
func TestOnePlanner(t *testing.T) {
	in := []byte(`{"request":{}}`)
	guest.HandlePlanFast(func(_ guest.Fields, plan *guest.PlanWriter) { plan.Refuse("fast") })
	guest.HandlePlan(func(guest.Request) guest.PlanResult { return guest.Refuse("map") })
	if got := string(guest.RunPlan(in)); got != `{"refusal":{"kind":"map"}}` {
		t.Fatalf("after HandlePlan: %s", got)
	}
	called := false
	guest.HandlePlanFast(func(_ guest.Fields, plan *guest.PlanWriter) { called = true; plan.Refuse("fast") })
	if got := string(guest.RunPlan(in)); got != `{"refusal":{"kind":"fast"}}` {
		t.Fatalf("after HandlePlanFast: %s", got)
	}
	called = false
	for _, bad := range []string{``, `{"request":{"a":1,}}`, `{"request":[]}`, `{"other":{}}`, `{"request":{}} x`} {
		if got := string(guest.RunPlan([]byte(bad))); got != `{"error":"bad input"}` || called {
			t.Fatalf("%q: %s (planner called: %v)", bad, got, called)
		}
	}
}
