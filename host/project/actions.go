package project

import (
	"fmt"

	"github.com/registrum/registrum/host/model"
)

// action resolves an immediate action: typed inputs, effects drawing on
// them, and preconditions on the records the effects reach.
func (c *compiler) action(a *Action, ap string) *model.Action {
	out := &model.Action{ID: a.ID}
	inputIDs := newIDs(c, "input")
	apiNames := map[string]string{}
	for i, in := range a.Inputs {
		ip := fmt.Sprintf("%s.inputs[%d]", ap, i)
		inputIDs.claim(in.ID, ip+".id")
		if f := c.field(in, ip, "internal", "input"); f != nil {
			c.wireName(f, ip, apiNames, false) // inputs travel under input, not in domainData
			out.Inputs = append(out.Inputs, f)
		}
	}
	out.Effects = c.effects(nil, out.Inputs, a.Effects, ap+".effects")
	for i, pc := range a.Preconditions {
		pp := fmt.Sprintf("%s.preconditions[%d]", ap, i)
		var ef *model.Effect
		for _, cand := range out.Effects {
			if cand.ID == pc.Effect {
				ef = cand
			}
		}
		if ef == nil {
			c.add(pp+".effect", "action.precondition", "effect %q is not an effect of action %q", pc.Effect, a.ID)
			continue
		}
		if ef.Operation != model.EffectPatch {
			c.add(pp+".effect", "action.precondition", "effect %q creates a record; preconditions test the existing record a patch reaches", ef.ID)
			continue
		}
		tgt := c.pkg.EntityByID(ef.Target.Entity)
		f := c.fieldRef(tgt, pc.Field, pp+".field", "precondition field")
		if (pc.Equals == nil) == (pc.EqualsInput == "") {
			c.add(pp, "action.precondition", "a precondition compares with exactly one of equals and equalsInput")
			continue
		}
		if f == nil {
			continue
		}
		if pc.EqualsInput != "" {
			in := out.Input(pc.EqualsInput)
			switch {
			case in == nil:
				c.add(pp+".equalsInput", "action.precondition", "equalsInput %q is not an input of action %q", pc.EqualsInput, a.ID)
			case in.Type != f.Type || in.Target != f.Target:
				c.add(pp+".equalsInput", "action.precondition", "input %q is %s; field %q is %s", in.ID, an(typeDesc(in)), f.ID, an(typeDesc(f)))
			}
		} else if err := CheckValue(f, pc.Equals); err != nil {
			c.add(pp+".equals", "action.precondition", "value does not fit field %q: %v", f.ID, err)
		}
		out.Preconditions = append(out.Preconditions, &model.Precondition{Effect: ef.ID, Field: f.ID, Equals: pc.Equals, EqualsInput: pc.EqualsInput})
	}
	return out
}
