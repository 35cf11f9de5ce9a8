package project

import (
	"fmt"
	"maps"
	"regexp"
	"slices"
	"time"

	"github.com/registrum/registrum/model"
)

// hook resolves one hook and enforces the compiler rules of events.
func (c *compiler) hook(e *model.Entity, h *Hook, hp string) *model.Hook {
	out := &model.Hook{ID: h.ID, EventType: h.ID + "-v1", Phase: h.Phase, Trigger: h.Trigger}
	// Rule 3: an entity hook runs after the commit.
	if h.Phase != "after" {
		c.add(hp+".phase", "hook.phase", "an entity hook has phase: after; phase %q is refused", h.Phase)
	}
	// Trigger compatibility.
	switch h.Trigger {
	case model.TriggerPatched, model.TriggerTombstoned:
		if e.MutationMode == model.CreateOnly {
			c.add(hp+".trigger", "hook.trigger", "entity %q is create-only: it is never %s", e.ID, h.Trigger)
		} else if h.Trigger == model.TriggerTombstoned && !e.Tombstone {
			c.add(hp+".trigger", "hook.trigger", "trigger tombstoned needs the entity to set tombstone: true")
		}
	case model.TriggerRequestLifecycle:
		if !e.IsRequestEntity() {
			c.add(hp+".trigger", "hook.trigger", "trigger request_lifecycle is only permitted on a change request entity; %q declares no changeRequest", e.ID)
		}
	}
	maxRank := model.ClassificationRank(e.Classification)
	if h.Trigger != model.TriggerRequestLifecycle {
		maxRank = -1 // only projected and condition fields count
	}
	raise := func(f *model.Field) {
		if r := model.ClassificationRank(f.Classification); r > maxRank {
			maxRank = r
		}
	}
	if w := h.When; w != nil {
		out.When = c.when(e, h.Trigger, w, hp+".when", raise)
	}
	// Rule 2 and 5: a projection names at least one declared field, by authored id.
	if len(h.Projection) == 0 {
		c.add(hp+".projection", "hook.projection", "a projection names at least one declared field")
	}
	for _, f := range c.fieldList(e, h.Projection, hp+".projection", "projected field", false) {
		raise(f)
	}
	out.Projection = h.Projection
	if maxRank < 0 {
		maxRank = 0
	}
	out.Classification = model.Classifications[maxRank]
	// Rule 4 and 7: handlers.
	if h.Handler == nil {
		if c.opts.Production {
			c.add(hp, "production.handler", "production compilation needs a handler for every hook; hook %q has none", h.ID)
		}
		if h.Retry != nil {
			c.add(hp+".retry", "hook.retry", "a retry schedule needs a handler to deliver to")
		}
		return out
	}
	out.Handler = c.handler(h, hp+".handler")
	out.Delivery = c.delivery(h.Retry, hp+".retry")
	return out
}

// retryDelayPattern is an authored pause: a whole number and one unit.
var retryDelayPattern = regexp.MustCompile(`^([0-9]{1,9})(ms|s|m|h)$`)

// delivery compiles a hook's delivery policy: the default, with the
// authored retry schedule when there is one. A schedule backs off (no
// step shorter than the one before), each step within the model's bounds,
// and the whole schedule ends before the payload's retention does.
func (c *compiler) delivery(r *Retry, rp string) *model.Delivery {
	d := model.DefaultDelivery()
	if r == nil {
		return d
	}
	d.RetryProfile = model.RetryProfileAuthored
	if len(r.Delays) > 0 {
		d.RetryDelaysMs = d.RetryDelaysMs[:0]
		for i, v := range r.Delays {
			at := fmt.Sprintf("%s.delays[%d]", rp, i)
			m := retryDelayPattern.FindStringSubmatch(v)
			if m == nil {
				c.add(at, "hook.retry", "%q is not a pause: write a whole number followed by ms, s, m or h (500ms, 5s, 30m, 2h)", v)
				continue
			}
			pause, _ := time.ParseDuration(m[1] + m[2])
			switch {
			case pause < model.MinRetryDelay || pause > model.MaxRetryDelay:
				c.add(at, "hook.retry", "a pause is %s to %s; %s is outside", model.MinRetryDelay, model.MaxRetryDelay, v)
				continue
			case len(d.RetryDelaysMs) > 0 && int(pause.Milliseconds()) < d.RetryDelaysMs[len(d.RetryDelaysMs)-1]:
				c.add(at, "hook.retry", "%s is shorter than the pause before it: a retry schedule backs off, it never speeds up", v)
			}
			d.RetryDelaysMs = append(d.RetryDelaysMs, int(pause.Milliseconds()))
		}
	}
	switch {
	case r.MaximumAttempts != 0:
		d.MaximumAttempts = r.MaximumAttempts
	case len(r.Delays) > 0:
		d.MaximumAttempts = len(r.Delays) + 1
	}
	if d.MaximumAttempts < 1 || d.MaximumAttempts > model.MaxDeliveryAttempts {
		c.add(rp+".maximumAttempts", "hook.retry", "a delivery makes 1 to %d attempts; this schedule makes %d", model.MaxDeliveryAttempts, d.MaximumAttempts)
	}
	retention := time.Duration(d.PayloadRetentionSeconds) * time.Second
	if span := model.RetrySpan(d.RetryDelaysMs, d.MaximumAttempts); span >= retention {
		c.add(rp, "hook.retry", "the schedule spans up to %s with its jitter, not less than the %s a payload is kept: an event would expire while it is retried", span, retention)
	}
	return d
}

func (c *compiler) when(e *model.Entity, trigger string, w *When, wp string, raise func(*model.Field)) *model.When {
	out := &model.When{Kind: w.Kind}
	fieldsTests := len(w.Changed) > 0 || len(w.BeforeEquals) > 0 || len(w.AfterEquals) > 0
	lifecycleTests := len(w.Transitions) > 0 || len(w.ToStates) > 0 || len(w.Stages) > 0
	switch w.Kind {
	case model.WhenFields:
		if trigger == model.TriggerRequestLifecycle {
			c.add(wp+".kind", "hook.when", "trigger request_lifecycle takes when.kind request_lifecycle, not fields")
		}
		if lifecycleTests {
			c.add(wp, "hook.when", "transitions, toStates and stages belong to when.kind request_lifecycle")
		}
		if !fieldsTests {
			c.add(wp, "hook.when", "when.kind fields needs at least one nonempty test (changed, beforeEquals, afterEquals)")
		}
		if len(w.Changed) > 0 && trigger != model.TriggerPatched {
			c.add(wp+".changed", "hook.when", "changed compares before and after values: it needs trigger patched")
		}
		if len(w.BeforeEquals) > 0 && trigger != model.TriggerPatched && trigger != model.TriggerTombstoned {
			c.add(wp+".beforeEquals", "hook.when", "beforeEquals needs trigger patched or tombstoned (a created record has no before)")
		}
		if len(w.AfterEquals) > 0 && trigger != model.TriggerCreated && trigger != model.TriggerPatched {
			c.add(wp+".afterEquals", "hook.when", "afterEquals needs trigger created or patched")
		}
		for _, f := range c.fieldList(e, w.Changed, wp+".changed", "condition field", false) {
			raise(f)
		}
		out.Changed = w.Changed
		out.BeforeEquals = c.fieldTests(e, w.BeforeEquals, wp+".beforeEquals", raise)
		out.AfterEquals = c.fieldTests(e, w.AfterEquals, wp+".afterEquals", raise)
	case model.WhenRequestLifecycle:
		if trigger != model.TriggerRequestLifecycle {
			c.add(wp+".kind", "hook.when", "when.kind request_lifecycle needs trigger request_lifecycle")
		}
		if fieldsTests {
			c.add(wp, "hook.when", "changed, beforeEquals and afterEquals belong to when.kind fields")
		}
		if !lifecycleTests {
			c.add(wp, "hook.when", "when.kind request_lifecycle needs at least one nonempty list of transitions, toStates or stages")
		}
		for i, st := range w.Stages {
			if e.ChangeRequest == nil || !slices.Contains(e.ChangeRequest.Review.Stages, st) {
				c.add(fmt.Sprintf("%s.stages[%d]", wp, i), "hook.when", "%q is not a review stage of %s: declare it in changeRequest.review.stages", st, e.ID)
			}
		}
		out.Transitions, out.ToStates, out.Stages = w.Transitions, w.ToStates, w.Stages
	}
	return out
}

func (c *compiler) fieldTests(e *model.Entity, m map[string]any, p string, raise func(*model.Field)) []*model.FieldTest {
	var out []*model.FieldTest
	for _, name := range slices.Sorted(maps.Keys(m)) {
		fp := p + "." + name
		f := c.fieldRef(e, name, fp, "condition field")
		if f == nil {
			continue
		}
		raise(f)
		v := m[name]
		if v != nil {
			if w, err := CheckValue(f, v); err != nil {
				c.add(fp, "hook.when", "value does not fit field %q: %v", f.ID, err)
			} else {
				v = w
			}
		} else if f.Required {
			c.add(fp, "hook.when", "field %q is required: it is never null", f.ID)
		}
		out = append(out, &model.FieldTest{Field: name, Value: v})
	}
	return out
}

func (c *compiler) handler(h *Hook, hp string) *model.Handler {
	hd := h.Handler
	out := &model.Handler{Kind: hd.Kind}
	misplaced := func(key, kind string) {
		c.add(hp+"."+key, "hook.handler", "%s is not a member of a %s handler", key, kind)
	}
	switch hd.Kind {
	case model.HandlerURL:
		if hd.Script != "" {
			misplaced("script", hd.Kind)
		}
		if hd.Module != "" {
			misplaced("module", hd.Kind)
		}
		if hd.SHA256 != "" {
			misplaced("sha256", hd.Kind)
		}
		if hd.Capabilities != nil {
			misplaced("capabilities", hd.Kind)
		}
		if hd.DestinationID == "" {
			c.add(hp, "hook.handler", "a url handler needs destinationId, the key of its runtime eventDestinations entry")
		}
		out.DestinationID = hd.DestinationID
	case model.HandlerTengo, model.HandlerWASM:
		file, key, other := hd.Script, "script", "module"
		if hd.Kind == model.HandlerWASM {
			file, key, other = hd.Module, "module", "script"
		}
		if hd.DestinationID != "" {
			misplaced("destinationId", hd.Kind)
		}
		if (hd.Kind == model.HandlerTengo && hd.Module != "") || (hd.Kind == model.HandlerWASM && hd.Script != "") {
			misplaced(other, hd.Kind)
		}
		if file == "" {
			c.add(hp, "hook.handler", "a %s handler names its reviewed %s path", hd.Kind, key)
			return out
		}
		modPath, digest := c.moduleFile(file, hd.SHA256, hp+"."+key, hp+".sha256")
		if modPath != "" {
			out.Module = "hook." + h.ID
			caps := slices.Sorted(slices.Values(hd.Capabilities))
			if len(slices.Compact(slices.Clone(caps))) != len(caps) {
				c.add(hp+".capabilities", "hook.handler", "a capability is listed twice")
			}
			c.pkg.Modules = append(c.pkg.Modules, model.Module{ID: out.Module, Engine: model.Engine(hd.Kind), Kind: "hook-handler", Path: modPath, SHA256: digest, Capabilities: capabilities(caps)})
		}
	}
	return out
}
