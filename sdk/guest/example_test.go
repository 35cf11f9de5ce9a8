package guest_test

import (
	"encoding/json"
	"fmt"

	"github.com/registrum/registrum/sdk/guest"
)

// A planner is an ordinary Go function from the request's fields to a plan.
// In a module it is registered from init and the program is built with
// GOOS=wasip1 GOARCH=wasm go build -buildmode=c-shared; here RunPlan runs it
// on the host exactly as the module's entry point would.
func ExampleHandlePlan() {
	guest.HandlePlan(func(req guest.Request) guest.PlanResult {
		id, ok := req.String("household_id")
		if !ok || id == "" {
			return guest.Refuse("household_missing")
		}
		effect := guest.Effect{
			ID:        "update_household",
			Operation: guest.Patch,
			Target:    guest.Target{Entity: "household", FromField: "household_id"},
			Set:       map[string]guest.FieldSource{"size": guest.FromField("size")},
		}
		if req.IsNull("phone") { // explicit null: clear; absent: leave alone
			effect.Clear = []string{"phone"}
		}
		return guest.PlanResult{Effects: []guest.Effect{effect}}
	})
	fmt.Printf("%s\n", guest.RunPlan([]byte(`{"request":{"household_id":"h-1","size":4,"phone":null}}`)))
	fmt.Printf("%s\n", guest.RunPlan([]byte(`{"request":{"size":4}}`)))
	// Output:
	// {"effects":[{"id":"update_household","operation":"patch","target":{"entity":"household","fromField":"household_id"},"set":{"size":{"fromField":"size"}},"clear":["phone"]}]}
	// {"refusal":{"kind":"household_missing"}}
}

// The fast planner API reads the request straight from the input bytes and
// writes the plan as it goes: no map, `any` value or PlanResult is built,
// which makes a call several times cheaper inside a WebAssembly guest. This
// is ExampleHandlePlan's planner with it, and its output is byte for byte
// the same. Effects are written in order; each effect's set members and
// clear list follow the call that begins it.
func ExampleHandlePlanFast() {
	guest.HandlePlanFast(func(req guest.Fields, plan *guest.PlanWriter) {
		id, ok := req.String("household_id")
		if !ok || id == "" {
			plan.Refuse("household_missing")
			return
		}
		plan.Patch("update_household", guest.Target{Entity: "household", FromField: "household_id"})
		plan.SetFromField("size", "size")
		if req.IsNull("phone") { // explicit null: clear; absent: leave alone
			plan.Clear("phone")
		}
		if contact, ok := req.Object("contact"); ok {
			plan.SetRaw("contact_name", contact.Raw("name")) // a value copied through
		}
	})
	fmt.Printf("%s\n", guest.RunPlan([]byte(`{"request":{"household_id":"h-1","size":4,"phone":null}}`)))
	fmt.Printf("%s\n", guest.RunPlan([]byte(`{"request":{"household_id":"h-1","contact":{"name":"Ama"}}}`)))
	fmt.Printf("%s\n", guest.RunPlan([]byte(`{"request":{"size":4}}`)))
	// Output:
	// {"effects":[{"id":"update_household","operation":"patch","target":{"entity":"household","fromField":"household_id"},"set":{"size":{"fromField":"size"}},"clear":["phone"]}]}
	// {"effects":[{"id":"update_household","operation":"patch","target":{"entity":"household","fromField":"household_id"},"set":{"contact_name":{"value":"Ama"},"size":{"fromField":"size"}}}]}
	// {"refusal":{"kind":"household_missing"}}
}

// A hook handler receives the exact captured event body and acknowledges it
// or asks for a retry with a short kind.
func ExampleHandleEvent() {
	guest.HandleEvent(func(ev guest.Event) guest.HookResult {
		if ev.Body["type"] == nil {
			return guest.Retry("untyped_event")
		}
		return guest.Acknowledge()
	})
	fmt.Printf("%s\n", guest.RunEvent([]byte(`{"type":"child.patched","data":{}}`)))
	fmt.Printf("%s\n", guest.RunEvent([]byte(`{"data":{}}`)))
	// Output:
	// {"outcome":"acknowledged"}
	// {"outcome":"retry","kind":"untyped_event"}
}

// An action handler computes values for the action's declared writes, or
// refuses with a declared code.
func ExampleHandleAction() {
	guest.HandleAction(func(in guest.Inputs) guest.ActionResult {
		amount, ok := in["amount"].(json.Number)
		if !ok {
			return guest.RefuseAction("amount_missing", "amount")
		}
		return guest.ActionResult{Writes: []guest.ActionWrite{
			guest.Write("payment", map[string]any{"amount": amount, "currency": "XOF"}),
		}}
	})
	fmt.Printf("%s\n", guest.RunAction([]byte(`{"inputs":{"amount":125.5}}`)))
	fmt.Printf("%s\n", guest.RunAction([]byte(`{"inputs":{}}`)))
	// Output:
	// {"writes":[{"id":"payment","set":{"amount":125.5,"currency":"XOF"}}]}
	// {"refusal":{"code":"amount_missing","field":"amount"}}
}
