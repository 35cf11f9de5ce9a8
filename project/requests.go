package project

import (
	"errors"
	"fmt"
	"io/fs"
	"maps"
	"path"
	"path/filepath"
	"slices"
	"strings"

	"github.com/registrum/registrum/internal/canonjson"
	"github.com/registrum/registrum/model"
)

// attachments resolves the attachment slots of an entity.
func (c *compiler) attachments(e *model.Entity, es *EntitySpec, ep string) {
	if len(es.Attachments) == 0 {
		return
	}
	if es.ChangeRequest == nil {
		c.add(ep+".attachments", "attachment.request-entity", "attachment slots belong to request entities; entity %q declares no changeRequest", e.ID)
	}
	// The slot count and byte bounds are enforced by the format schema.
	slotIDs := newIDs(c, "attachment slot")
	for i, s := range es.Attachments {
		sp := fmt.Sprintf("%s.attachments[%d]", ep, i)
		slotIDs.claim(s.ID, sp+".id")
		// A slot appears in domainData under its id: it must not collide.
		for _, r := range ReservedNames {
			if s.ID == r {
				c.add(sp+".id", "apiname.reserved", "slot id %q collides with the record envelope member %q", s.ID, r)
			}
		}
		if f := e.Field(s.ID); f != nil {
			c.add(sp+".id", "attachment.id", "slot id %q is also the id of a field", s.ID)
		} else if f := e.FieldByAPIName(s.ID); f != nil {
			c.add(sp+".id", "attachment.id", "slot id %q is also the apiName of field %q: both would appear in domainData", s.ID, f.ID)
		}
		seen := map[string]bool{}
		for j, ct := range s.ContentTypes {
			cp := fmt.Sprintf("%s.contentTypes[%d]", sp, j)
			switch {
			case ct != strings.ToLower(ct):
				c.add(cp, "attachment.content-type", "content type %q must be lowercase (%q)", ct, strings.ToLower(ct))
			case strings.Contains(ct, "*"):
				c.add(cp, "attachment.content-type", "content type %q is a wildcard; list concrete media types", ct)
			case !mediaTypeRE.MatchString(ct):
				c.add(cp, "attachment.content-type", "content type %q is not a concrete media type type/subtype without parameters", ct)
			case seen[ct]:
				c.add(cp, "attachment.content-type", "content type %q is listed twice", ct)
			}
			seen[ct] = true
		}
		slot := &model.AttachmentSlot{ID: s.ID, Required: s.Required, MaximumBytes: s.MaximumBytes,
			ContentTypes: s.ContentTypes, Classification: or(s.Classification, e.Classification)}
		if s.Verification != nil {
			if c.pkg.Verifiers == nil || !hasVerifier(c.pkg.Verifiers, s.Verification.Verifier) {
				c.add(sp+".verification.verifier", "attachment.verifier", "verifier %q is not declared in verifiers", s.Verification.Verifier)
			}
			slot.Verification = &model.Verification{Verifier: s.Verification.Verifier, PolicyID: s.Verification.PolicyID}
		}
		e.Attachments = append(e.Attachments, slot)
	}
}

func hasVerifier(vs []model.Verifier, id string) bool {
	for _, v := range vs {
		if v.ID == id {
			return true
		}
	}
	return false
}

// changeRequest resolves a request entity's change request declaration.
func (c *compiler) changeRequest(e *model.Entity, cr *ChangeRequest, cp string) *model.ChangeRequest {
	out := &model.ChangeRequest{
		Application: model.Application{Mode: model.ApplyManual},
		Retention:   model.Retention{Mode: model.RetainAll},
	}
	switch {
	case len(cr.Effects) > 0 && cr.Planner != nil:
		c.add(cp, "change-request.plan", "declare either effects or a planner, not both")
	case len(cr.Effects) == 0 && cr.Planner == nil:
		c.add(cp, "change-request.plan", "a change request needs effects (declarative) or a planner")
	case cr.Planner != nil:
		out.Planner = c.planner(e, cr.Planner, cp+".planner")
	default:
		out.Effects = c.effects(e, nil, cr.Effects, cp+".effects", nil)
	}
	rv := cr.Review
	rp := cp + ".review"
	switch {
	case rv.Mode == model.ReviewNone && (rv.Authority != "" || rv.PolicyID != ""):
		c.add(rp, "change-request.review", "review is either {authority, policyId} or {mode: none}, not both")
	case rv.Mode == model.ReviewNone && len(rv.Stages) > 0:
		c.add(rp+".stages", "change-request.review", "review stages belong to an authority's review; mode none has none")
	case rv.Mode == model.ReviewNone:
		out.Review = model.Review{Mode: model.ReviewNone}
	case rv.Authority == "" || rv.PolicyID == "":
		c.add(rp, "change-request.review", "review needs both authority and policyId (or mode: none)")
	default:
		out.Review = model.Review{Mode: model.ReviewAuthority, Authority: rv.Authority, PolicyID: rv.PolicyID}
		seen := map[string]bool{}
		for i, st := range rv.Stages {
			if seen[st] {
				c.add(fmt.Sprintf("%s.stages[%d]", rp, i), "change-request.review", "review stage %q is listed twice", st)
				continue
			}
			seen[st] = true
			out.Review.Stages = append(out.Review.Stages, st)
		}
	}
	if a := cr.Application; a != nil {
		ap := cp + ".application"
		switch {
		case a.Mode == model.ApplyAutomatic && a.Executor == "":
			c.add(ap, "change-request.application", "automatic application needs executor, the logical executor that applies with its own credential")
		case a.Mode == model.ApplyManual && a.Executor != "":
			c.add(ap+".executor", "change-request.application", "executor belongs to automatic application; manual application waits for an authorized caller")
		}
		out.Application = model.Application{Mode: a.Mode, Executor: a.Executor}
		out.Application.Dispositions, out.Application.QueueReasons = c.applicationPolicy(a, ap)
	}
	if len(out.Application.Dispositions) == 0 {
		out.Application.Dispositions = []string{model.DispositionApply}
	}
	if cr.Retention != nil {
		out.Retention = model.Retention{Mode: cr.Retention.Mode}
	}
	return out
}

// applicationPolicy checks the allowed dispositions and queue reasons of an
// application declaration: dispositions unique (default apply alone), queue
// reasons unique, required with queue and refused without it.
func (c *compiler) applicationPolicy(a *Application, ap string) ([]string, []string) {
	seen := map[string]bool{}
	for i, d := range a.Dispositions {
		if seen[d] {
			c.add(fmt.Sprintf("%s.dispositions[%d]", ap, i), "change-request.application", "disposition %q is listed twice", d)
		}
		seen[d] = true
	}
	reasons := map[string]bool{}
	for i, r := range a.QueueReasons {
		if reasons[r] {
			c.add(fmt.Sprintf("%s.queueReasons[%d]", ap, i), "change-request.application", "queue reason %q is listed twice", r)
		}
		reasons[r] = true
	}
	switch {
	case seen[model.DispositionQueue] && len(a.QueueReasons) == 0:
		c.add(ap+".queueReasons", "change-request.application", "the queue disposition needs queueReasons, the reason codes a queued request may carry")
	case !seen[model.DispositionQueue] && len(a.QueueReasons) > 0:
		c.add(ap+".queueReasons", "change-request.application", "queueReasons belong to the queue disposition, which dispositions does not allow")
	}
	return slices.Clone(a.Dispositions), slices.Clone(a.QueueReasons)
}

// effects resolves declarative effects. src is the request entity (for a
// change request) or nil with inputs set (for an action).
//
// supplied maps an effect id to the target fields an action handler gives
// values for; they count as set.
func (c *compiler) effects(src *model.Entity, inputs []*model.Field, list []*Effect, lp string, supplied map[string][]string) []*model.Effect {
	var out []*model.Effect
	byID := map[string]*model.Effect{}
	srcField := func(name, p, role string) *model.Field {
		if src != nil {
			return c.fieldRef(src, name, p, role)
		}
		for _, in := range inputs {
			if in.ID == name {
				return in
			}
		}
		c.add(p, "effect.source", "%s %q is not an input of the action", role, name)
		return nil
	}
	for i, ef := range list {
		p := fmt.Sprintf("%s[%d]", lp, i)
		id := or(ef.ID, fmt.Sprintf("effect-%d", i+1))
		if _, dup := byID[id]; dup {
			c.add(p+".id", "identifier.duplicate", "effect %q is already declared", id)
		}
		me := &model.Effect{ID: id, Operation: ef.Operation}
		byID[id] = me
		tgt := c.effectTarget(ef.Operation, ef.Target, p+".target", byID, srcField)
		if tgt == nil {
			continue
		}
		me.Target.Entity = tgt.ID
		me.Target.FromField = ef.Target.FromField
		me.Target.FromEffect = ef.Target.FromEffect
		for _, name := range slices.Sorted(maps.Keys(ef.Set)) {
			sp := p + ".set." + name
			s := ef.Set[name]
			tf := c.targetField(tgt, name, sp)
			sf := &model.SetField{Field: name, FromField: s.FromField, FromEffect: s.FromEffect, Value: s.Value}
			n := 0
			for _, b := range []bool{s.FromField != "", s.FromEffect != "", s.Value != nil} {
				if b {
					n++
				}
			}
			if n != 1 {
				c.add(sp, "effect.set", "a set value comes from exactly one of fromField, fromEffect and value")
				continue
			}
			switch {
			case s.FromField != "":
				f := srcField(s.FromField, sp+".fromField", "fromField")
				if f != nil && tf != nil && (f.Type != tf.Type || f.Target != tf.Target) {
					c.add(sp+".fromField", "effect.set", "fromField %q is %s field; target field %q is %s field", f.ID, an(typeDesc(f)), tf.ID, an(typeDesc(tf)))
				}
			case s.FromEffect != "":
				prev, ok := byID[s.FromEffect]
				switch {
				case !ok || prev == me:
					c.add(sp+".fromEffect", "effect.set", "fromEffect %q is not an earlier effect", s.FromEffect)
				case prev.Operation != model.EffectCreate:
					c.add(sp+".fromEffect", "effect.set", "fromEffect %q is a %s effect; only a create effect yields a new record id", s.FromEffect, prev.Operation)
				case tf != nil && (tf.Type != model.TypeReference || tf.Target != prev.Target.Entity):
					c.add(sp+".fromEffect", "effect.set", "field %q must be a reference to %q to take the record created by %q", tf.ID, prev.Target.Entity, s.FromEffect)
				}
			default:
				if tf != nil {
					if w, err := CheckValue(tf, s.Value); err != nil {
						c.add(sp+".value", "effect.set", "value does not fit field %q: %v", tf.ID, err)
					} else {
						sf.Value = w
					}
				}
			}
			me.Set = append(me.Set, sf)
		}
		for j, name := range ef.Clear {
			cp := fmt.Sprintf("%s.clear[%d]", p, j)
			if tf := c.targetField(tgt, name, cp); tf != nil {
				if tf.Required {
					c.add(cp, "effect.clear", "field %q is required; it cannot be cleared", tf.ID)
				}
				if ef.Set[name] != nil {
					c.add(cp, "effect.clear", "field %q is both set and cleared", tf.ID)
				}
			}
			me.Clear = append(me.Clear, name)
		}
		if ef.Operation == model.EffectCreate {
			for _, f := range tgt.Fields {
				if f.Required && ef.Set[f.ID] == nil && !slices.Contains(supplied[id], f.ID) {
					c.add(p+".set", "effect.required", "a create effect on %q must set required field %q", tgt.ID, f.ID)
				}
			}
			if len(ef.Clear) > 0 {
				c.add(p+".clear", "effect.clear", "a create effect has nothing to clear")
			}
		} else if len(ef.Set) == 0 && len(ef.Clear) == 0 && len(supplied[id]) == 0 {
			c.add(p, "effect.set", "a patch effect must set or clear at least one field")
		}
		out = append(out, me)
	}
	return out
}

func typeDesc(f *model.Field) string {
	if f.Type == model.TypeReference {
		return "reference to " + f.Target
	}
	return string(f.Type)
}

// effectTarget resolves the target entity of an effect or planned write.
func (c *compiler) effectTarget(op string, t EffectTarget, tp string, earlier map[string]*model.Effect, srcField func(name, p, role string) *model.Field) *model.Entity {
	var entityID string
	switch op {
	case model.EffectCreate:
		if t.FromField != "" || t.FromEffect != "" {
			c.add(tp, "effect.target", "a create effect names only target.entity; fromField and fromEffect select existing records")
			return nil
		}
		entityID = t.Entity
		if entityID == "" {
			c.add(tp, "effect.target", "a create effect needs target.entity")
			return nil
		}
	case model.EffectPatch:
		switch {
		case (t.FromField == "") == (t.FromEffect == ""):
			c.add(tp, "effect.target", "a patch selects its record with exactly one of fromField and fromEffect")
			return nil
		case t.FromField != "":
			f := srcField(t.FromField, tp+".fromField", "fromField")
			if f == nil {
				return nil
			}
			if f.Type != model.TypeReference {
				c.add(tp+".fromField", "effect.target", "fromField %q is %s field; it must be a reference field", f.ID, an(f.Type))
				return nil
			}
			entityID = f.Target
		default:
			prev, ok := earlier[t.FromEffect]
			if !ok || prev.Operation != model.EffectCreate || prev.Target.Entity == "" {
				c.add(tp+".fromEffect", "effect.target", "fromEffect %q is not an earlier create effect", t.FromEffect)
				return nil
			}
			entityID = prev.Target.Entity
		}
		if t.Entity != "" && t.Entity != entityID {
			c.add(tp+".entity", "effect.target", "target.entity %q disagrees with the selected record's entity %q", t.Entity, entityID)
			return nil
		}
	}
	tgt := c.pkg.EntityByID(entityID)
	if tgt == nil {
		c.add(tp+".entity", "effect.target", "target entity %q is not declared", entityID)
		return nil
	}
	if op == model.EffectPatch && tgt.MutationMode == model.CreateOnly {
		c.add(tp, "effect.target", "entity %q is create-only; an effect cannot patch it", tgt.ID)
		return nil
	}
	return tgt
}

// targetField resolves a field an effect writes; attachment slots are engine-owned.
func (c *compiler) targetField(tgt *model.Entity, name, p string) *model.Field {
	for _, es := range c.proj.Entities {
		if es.ID != tgt.ID {
			continue
		}
		for _, s := range es.Attachments {
			if s.ID == name {
				c.add(p, "effect.slot", "%q is an attachment slot of %q; slots are engine-owned and effects cannot write them", name, tgt.ID)
				return nil
			}
		}
	}
	return c.fieldRef(tgt, name, p, "target field")
}

// planner resolves a planner module and its declared writes.
func (c *compiler) planner(e *model.Entity, pl *Planner, pp string) *model.Planner {
	out := &model.Planner{Engine: pl.Engine, Module: "planner." + e.ID}
	modPath, digest := c.moduleFile(pl.Path, pl.SHA256, pp+".path", pp+".sha256")
	if modPath != "" {
		c.pkg.Modules = append(c.pkg.Modules, model.Module{ID: out.Module, Engine: model.Engine(pl.Engine), Kind: "planner", Path: modPath, SHA256: digest})
	}
	writeIDs := newIDs(c, "write")
	for i, w := range pl.Writes {
		wp := fmt.Sprintf("%s.writes[%d]", pp, i)
		id := or(w.ID, fmt.Sprintf("write-%d", i+1))
		writeIDs.claim(id, wp)
		src := func(name, p, role string) *model.Field { return c.fieldRef(e, name, p, role) }
		if w.Target.FromEffect != "" {
			c.add(wp+".target.fromEffect", "effect.target", "planner writes select targets by entity or fromField")
			continue
		}
		var tgt *model.Entity
		if w.Target.FromField == "" {
			// The planner finds or creates the records itself: the entity names the target.
			if tgt = c.pkg.EntityByID(w.Target.Entity); tgt == nil {
				c.add(wp+".target", "effect.target", "a planner write needs target.entity (a declared entity) or target.fromField")
				continue
			}
			if w.Operation == model.EffectPatch && tgt.MutationMode == model.CreateOnly {
				c.add(wp+".target", "effect.target", "entity %q is create-only; a planner cannot patch it", tgt.ID)
				continue
			}
		} else if tgt = c.effectTarget(w.Operation, w.Target, wp+".target", nil, src); tgt == nil {
			continue
		}
		for j, name := range w.Fields {
			fp := fmt.Sprintf("%s.fields[%d]", wp, j)
			c.targetField(tgt, name, fp)
		}
		out.Writes = append(out.Writes, &model.PlannedWrite{ID: id, Operation: w.Operation,
			Target: model.EffectTarget{Entity: tgt.ID, FromField: w.Target.FromField}, Fields: w.Fields})
	}
	return out
}

// moduleFile reads a script, module or binary named by the project, checks
// its pinned digest, and places it in the package under source/. It returns
// the package-relative path and the actual digest.
func (c *compiler) moduleFile(rel, pin, pathKey, pinKey string) (string, string) {
	return c.packagedFile(rel, pin, pathKey, pinKey, "module")
}

// packagedFile is moduleFile with the file role given.
func (c *compiler) packagedFile(rel, pin, pathKey, pinKey, role string) (string, string) {
	clean := path.Clean(filepath.ToSlash(rel))
	if rel == "" || path.IsAbs(clean) || clean == ".." || strings.HasPrefix(clean, "../") || filepath.IsAbs(rel) {
		c.add(pathKey, "module.path", "path %q must be relative and inside the project folder", rel)
		return "", ""
	}
	for _, n := range ProjectFileNames {
		if clean == n {
			c.add(pathKey, "module.path", "path %q is the project document itself", rel)
			return "", ""
		}
	}
	full := filepath.Join(c.dir, filepath.FromSlash(clean))
	if !c.inside(full) {
		c.add(pathKey, "module.path", "path %q leads outside the project folder (through a symbolic link)", rel)
		return "", ""
	}
	b, err := readBounded(full, MaxModuleBytes)
	if err != nil {
		var pe *fs.PathError
		if errors.As(err, &pe) {
			err = pe.Err // the message names the file already, relative to the project
		}
		c.add(pathKey, "module.missing", "cannot read %q: %v", rel, err)
		return "", ""
	}
	digest := canonjson.DigestBytes(b)
	switch {
	case pin != "" && pin != digest:
		c.add(pinKey, "module.digest", "%q has digest %s, not the pinned %s; review the file and pin its digest again", rel, digest, pin)
	case pin == "" && c.opts.Production:
		c.add(pathKey, "production.pin", "production compilation needs a pinned sha256 for %q (it is %s)", rel, digest)
	}
	pkgPath := "source/" + clean
	if _, dup := c.contents[pkgPath]; !dup {
		c.contents[pkgPath] = b
		c.files = append(c.files, model.File{Path: pkgPath, Role: role})
	}
	return pkgPath, digest
}

// inside reports whether path, with symbolic links resolved, is inside the
// project folder. A path that does not exist is judged by its name alone
// (reading it will fail).
func (c *compiler) inside(path string) bool {
	root, err := filepath.EvalSymlinks(c.dir)
	if err != nil {
		return true
	}
	real, err := filepath.EvalSymlinks(path)
	if err != nil {
		return true
	}
	rel, err := filepath.Rel(root, real)
	return err == nil && rel != ".." && !strings.HasPrefix(rel, ".."+string(filepath.Separator))
}
