package project

import (
	"fmt"
	"slices"

	"github.com/registrum/registrum/model"
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
	supplied := map[string][]string{}
	if a.Handler != nil {
		for _, w := range a.Handler.Writes {
			supplied[w.Effect] = append(supplied[w.Effect], w.Fields...)
		}
	}
	out.Effects = c.effects(nil, out.Inputs, a.Effects, ap+".effects", supplied)
	if a.Handler != nil {
		out.Handler = c.actionHandler(a, out, ap+".handler")
	}
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
		equals := pc.Equals
		if pc.EqualsInput != "" {
			in := out.Input(pc.EqualsInput)
			switch {
			case in == nil:
				c.add(pp+".equalsInput", "action.precondition", "equalsInput %q is not an input of action %q", pc.EqualsInput, a.ID)
			case in.Type != f.Type || in.Target != f.Target:
				c.add(pp+".equalsInput", "action.precondition", "input %q is %s; field %q is %s", in.ID, an(typeDesc(in)), f.ID, an(typeDesc(f)))
			}
		} else if w, err := CheckValue(f, pc.Equals); err != nil {
			c.add(pp+".equals", "action.precondition", "value does not fit field %q: %v", f.ID, err)
		} else {
			equals = w
		}
		out.Preconditions = append(out.Preconditions, &model.Precondition{Effect: ef.ID, Field: f.ID, Equals: equals, EqualsInput: pc.EqualsInput})
	}
	return out
}

// actionHandler resolves the reviewed module that computes values for an
// action's effects: each declared write names an effect of the action and
// the fields of its target the handler may give values for.
func (c *compiler) actionHandler(a *Action, out *model.Action, hp string) *model.ActionHandler {
	h := a.Handler
	mh := &model.ActionHandler{Engine: h.Engine, Module: "action." + a.ID, Refusals: h.Refusals}
	modPath, digest := c.moduleFile(h.Path, h.SHA256, hp+".path", hp+".sha256")
	if modPath != "" {
		caps := slices.Sorted(slices.Values(h.Capabilities))
		if len(slices.Compact(slices.Clone(caps))) != len(caps) {
			c.add(hp+".capabilities", "action.handler", "a capability is listed twice")
		}
		c.pkg.Modules = append(c.pkg.Modules, model.Module{ID: mh.Module, Engine: model.Engine(h.Engine), Kind: "action-handler", Path: modPath, SHA256: digest, Capabilities: capabilities(caps)})
	}
	seen := map[string]bool{}
	for i, w := range h.Writes {
		wp := fmt.Sprintf("%s.writes[%d]", hp, i)
		if seen[w.Effect] {
			c.add(wp+".effect", "identifier.duplicate", "effect %q already has a handler write", w.Effect)
			continue
		}
		seen[w.Effect] = true
		var ef *model.Effect
		for _, cand := range out.Effects {
			if cand.ID == w.Effect {
				ef = cand
			}
		}
		if ef == nil {
			c.add(wp+".effect", "action.handler", "effect %q is not an effect of action %q", w.Effect, a.ID)
			continue
		}
		tgt := c.pkg.EntityByID(ef.Target.Entity)
		for j, name := range w.Fields {
			c.targetField(tgt, name, fmt.Sprintf("%s.fields[%d]", wp, j))
		}
		mh.Writes = append(mh.Writes, &model.HandlerWrite{Effect: ef.ID, Fields: w.Fields})
	}
	codes := map[string]bool{}
	for i, code := range h.Refusals {
		if codes[code] {
			c.add(fmt.Sprintf("%s.refusals[%d]", hp, i), "action.handler", "refusal code %q is listed twice", code)
		}
		codes[code] = true
	}
	return mh
}
