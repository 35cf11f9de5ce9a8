// Package plan is the example change-request planner of the child support
// registry, as plain Go: a request to change a child's contact details
// becomes a patch of the child record and, when a new guardian is named, a
// create of the guardian record the child then points to.
//
// The logic is written three times, and all must produce byte-identical
// plans for every request: Plan, against the guest SDK's map-based API
// (guest.HandlePlan), the easiest to read; PlanFast, against its fast API
// (guest.HandlePlanFast), which the WebAssembly build (../wasm) uses; and
// the tengo script ../planner.tengo.
package plan

import (
	"strings"

	"github.com/registrum/registrum/plugins/contract"
	"github.com/registrum/registrum/sdk/guest"
)

// Writes are the writes this planner declares; the host refuses any plan
// with an effect outside them. A package declares the same list for the
// planner (both the tengo and the WebAssembly build).
var Writes = []contract.Write{
	{Entity: "guardian", Operation: contract.OperationCreate, Fields: []string{"name", "relationship"}},
	{Entity: "child", Operation: contract.OperationPatch, Fields: []string{"address", "phone", "guardian_id", "case_notes"}},
}

// Plan turns the request fields child_id, address, phone, guardian and notes
// into a plan.
//
//   - child_id must be a non-empty string, or the request is refused
//     (child_missing).
//   - guardian: an object with a non-empty name creates a guardian record and
//     links the child to it; an explicit null unlinks the guardian; anything
//     else is refused (guardian_incomplete).
//   - address: copied from the request; an explicit null clears it.
//   - phone: spaces and dashes removed; an explicit null clears it.
//   - notes: copied to case_notes.
//
// A request that changes nothing is refused (nothing_to_change).
func Plan(req guest.Request) guest.PlanResult {
	child, ok := req.String("child_id")
	if !ok || child == "" {
		return guest.Refuse("child_missing")
	}
	var effects []guest.Effect
	set := map[string]guest.FieldSource{}
	var clear []string

	if req.IsNull("guardian") {
		clear = append(clear, "guardian_id")
	} else if req.Has("guardian") {
		g, ok := req.Object("guardian")
		name, _ := g["name"].(string)
		if !ok || name == "" {
			return guest.Refuse("guardian_incomplete")
		}
		gset := map[string]guest.FieldSource{"name": guest.Value(name)}
		if rel, ok := g["relationship"]; ok {
			gset["relationship"] = guest.Value(rel)
		}
		effects = append(effects, guest.Effect{
			ID: "new_guardian", Operation: guest.Create,
			Target: guest.Target{Entity: "guardian"}, Set: gset,
		})
		set["guardian_id"] = guest.FromEffect("new_guardian")
	}

	if req.IsNull("address") {
		clear = append(clear, "address")
	} else if req.Has("address") {
		set["address"] = guest.FromField("address")
	}

	if req.IsNull("phone") {
		clear = append(clear, "phone")
	} else if phone, ok := req.String("phone"); ok {
		phone = strings.ReplaceAll(strings.ReplaceAll(phone, " ", ""), "-", "")
		set["phone"] = guest.Value(phone)
	}

	if _, ok := req.String("notes"); ok {
		set["case_notes"] = guest.FromField("notes")
	}

	if len(set) == 0 && len(clear) == 0 {
		return guest.Refuse("nothing_to_change")
	}
	effects = append(effects, guest.Effect{
		ID: "update_child", Operation: guest.Patch,
		Target: guest.Target{Entity: "child", FromField: "child_id"},
		Set:    set, Clear: clear,
	})
	return guest.PlanResult{Effects: effects}
}
