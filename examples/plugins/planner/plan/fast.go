package plan

import (
	"strings"

	"github.com/registrum/registrum/sdk/guest"
)

// PlanFast is Plan written against the guest SDK's fast planner API
// (guest.HandlePlanFast): the same rules and byte for byte the same plans,
// reading the request straight from the input bytes and writing the plan as
// it goes, with no map or `any` value. The WebAssembly build registers this
// one: inside a guest it is several times cheaper than Plan.
//
// The fast API writes effects in order, so the guardian's create comes first,
// and the child's patch is begun only once every refusal that can come
// before it has been ruled out; a refusal after it (nothing_to_change)
// replaces the whole plan.
func PlanFast(req guest.Fields, plan *guest.PlanWriter) {
	child, ok := req.String("child_id")
	if !ok || child == "" {
		plan.Refuse("child_missing")
		return
	}

	guardianNull := req.IsNull("guardian")
	newGuardian := !guardianNull && req.Has("guardian")
	if newGuardian {
		g, ok := req.Object("guardian")
		name, _ := g.String("name")
		if !ok || name == "" {
			plan.Refuse("guardian_incomplete")
			return
		}
		plan.Create("new_guardian", "guardian")
		plan.SetString("name", name)
		if rel := g.Raw("relationship"); rel != nil {
			plan.SetRaw("relationship", rel)
		}
	}

	plan.Patch("update_child", guest.Target{Entity: "child", FromField: "child_id"})
	changed := guardianNull || newGuardian
	if guardianNull {
		plan.Clear("guardian_id")
	} else if newGuardian {
		plan.SetFromEffect("guardian_id", "new_guardian")
	}

	if req.IsNull("address") {
		plan.Clear("address")
		changed = true
	} else if req.Has("address") {
		plan.SetFromField("address", "address")
		changed = true
	}

	if req.IsNull("phone") {
		plan.Clear("phone")
		changed = true
	} else if phone, ok := req.String("phone"); ok {
		plan.SetString("phone", stripPhone(phone))
		changed = true
	}

	if _, ok := req.String("notes"); ok {
		plan.SetFromField("case_notes", "notes")
		changed = true
	}

	if !changed {
		plan.Refuse("nothing_to_change")
	}
}

// stripPhone removes spaces and dashes from s, as Plan's two ReplaceAll
// calls do, with at most one allocation.
func stripPhone(s string) string {
	if strings.IndexByte(s, ' ') < 0 && strings.IndexByte(s, '-') < 0 {
		return s
	}
	var b strings.Builder
	b.Grow(len(s))
	for i := 0; i < len(s); i++ {
		if c := s[i]; c != ' ' && c != '-' {
			b.WriteByte(c)
		}
	}
	return b.String()
}
