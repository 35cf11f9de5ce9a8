package dev

import (
	"fmt"
	"slices"
	"strings"

	"github.com/registrum/registrum/model"
)

// hasReviewedEntities reports whether a request entity of the package is
// reviewed by an external authority (dev then runs the review desk).
func hasReviewedEntities(p *model.Package) bool {
	return slices.ContainsFunc(p.Entities, func(e *model.Entity) bool {
		return e.IsRequestEntity() && e.ChangeRequest.Review.Mode == model.ReviewAuthority
	})
}

// ReviewedJourney is the part of the walkthrough that goes through the
// review desk: a draft of a request reviewed by an authority, its submit
// (the host sends it to the desk), the reviewer's approval on the desk's
// pages, the apply under a profile that may apply it, and a read of the
// record its first effect changed (a patch's target, read by id) or made
// (a create's, found by a filtered list).
type ReviewedJourney struct {
	Entity *model.Entity
	// Profile drafts and submits; ApplyProfile reads the offered apply and applies.
	Profile, ApplyProfile string
	Default, ApplyDefault bool
	Setup                 []*SetupRecord
	Draft                 string
	// Slot is the entity's required attachment slot, filled before submit
	// (nil when it has none); SlotType the media type uploaded.
	Slot     *model.AttachmentSlot
	SlotType string
	// Unique names the draft fields that end up in a unique field of the
	// created record: the printed draft applies once.
	Unique []string
	// Changed is the setup record the first effect patches, or nil.
	Changed *SetupRecord
	// Find lists the record the first effect creates (when it is a create).
	Find *FindCreated
}

// FindCreated is a list read that finds the record a create effect made by
// a filterable field the effect copies from the request.
type FindCreated struct {
	Entity  *model.Entity
	Profile string
	Default bool
	Filter  string
}

// planReviewedJourney picks the first request entity reviewed by an
// authority and applied by a person that the standard demo client can
// draft, submit and apply (possibly under two profiles), with declared
// effects whose first one patches a record the journey creates or creates
// one a usable profile can find with a filter. Records the earlier journey
// creates are reused. A required attachment slot is filled before submit;
// an entity with more than one, or one the grant cannot write and read, is
// left out.
func planReviewedJourney(p *model.Package, usable []string, claims map[string]string, earlier *RequestJourney) *ReviewedJourney {
	for _, pr := range p.Profiles {
		if pr.Anonymous || !slices.Contains(usable, pr.ID) {
			continue
		}
		for _, g := range pr.Grants {
			e := p.EntityByID(g.Entity)
			if e == nil || !e.IsRequestEntity() || e.ChangeRequest.Review.Mode != model.ReviewAuthority ||
				e.ChangeRequest.Application.Mode != model.ApplyManual || len(e.ChangeRequest.Effects) == 0 {
				continue
			}
			slot, slotType, ok := requiredSlot(e, g)
			if !ok {
				continue
			}
			if !allowsAll(g, model.OpCreate, model.OpGet, model.OpSubmitRequest) || !g.RowBoundaries.Unrestricted {
				continue
			}
			jp := &journeyPlanner{p: p, usable: usable, claims: claims, made: map[string]*SetupRecord{}}
			if earlier != nil {
				for _, rec := range earlier.Setup {
					jp.made[rec.Entity.ID] = rec
				}
			}
			data, ok := jp.values(e, g, true, 0)
			if !ok {
				continue
			}
			applier := applyProfile(p, e, usable, jp, data)
			if applier == nil {
				continue
			}
			j := &ReviewedJourney{Entity: e, Profile: pr.ID, Default: pr.Default, ApplyProfile: applier.ID, ApplyDefault: applier.Default,
				Setup: jp.setup, Draft: placeholderBody(data), Slot: slot, SlotType: slotType}
			switch first := e.ChangeRequest.Effects[0]; first.Operation {
			case model.EffectPatch:
				if f := e.Field(first.Target.FromField); f != nil {
					j.Changed = jp.made[f.Target]
				}
			case model.EffectCreate:
				j.Find, j.Unique = findCreated(p, e, usable, data)
			}
			if j.Changed == nil && j.Find == nil {
				continue
			}
			return j
		}
	}
	return nil
}

// requiredSlot returns e's one required attachment slot and the media type
// to upload (nil when it has none); ok is false when it has more than one or
// the grant cannot write and read it, or it needs a verifier (dev runs none).
func requiredSlot(e *model.Entity, g *model.Grant) (*model.AttachmentSlot, string, bool) {
	var slot *model.AttachmentSlot
	for _, s := range e.Attachments {
		if !s.Required {
			continue
		}
		if slot != nil || !slices.Contains(g.WritableFields, s.ID) || !slices.Contains(g.ReadableFields, s.ID) || s.Verification != nil || len(s.ContentTypes) == 0 {
			return nil, "", false
		}
		slot = s
	}
	if slot == nil {
		return nil, "", true
	}
	if slices.Contains(slot.ContentTypes, "application/pdf") {
		return slot, "application/pdf", true
	}
	return slot, slot.ContentTypes[0], true
}

// reviewedAttachment is the document the reviewed journey uploads: the
// header of a PDF, enough for a slot that takes application/pdf (the host
// checks the declared media type, not the content).
const reviewedAttachment = "%PDF-1.7 example certificate for the registrum dev walkthrough"

// effectTargets are the entities a request's declared effects write.
func effectTargets(e *model.Entity) []string {
	var out []string
	for _, ef := range e.ChangeRequest.Effects {
		if !slices.Contains(out, ef.Target.Entity) {
			out = append(out, ef.Target.Entity)
		}
	}
	return out
}

// applyProfile returns a usable profile whose grant on e reads and applies
// it, sees the draft within its row boundaries, and lists every effect
// target among its apply targets.
func applyProfile(p *model.Package, e *model.Entity, usable []string, jp *journeyPlanner, data map[string]any) *model.Profile {
	for _, pr := range p.Profiles {
		g := pr.Grant(e.ID)
		if pr.Anonymous || !slices.Contains(usable, pr.ID) || g == nil || !allowsAll(g, model.OpGet, model.OpApplyRequest) || !jp.withinBoundaries(e, g, data) {
			continue
		}
		covered := true
		for _, target := range effectTargets(e) {
			covered = covered && slices.ContainsFunc(g.ApplyTargets, func(t *model.Target) bool { return t.Entity == target })
		}
		if covered {
			return pr
		}
	}
	return nil
}

// findCreated plans the list read of the record e's first create effect
// makes: a usable profile listing the target with a filter on a filterable
// string field the effect copies from the draft. unique names the draft
// fields copied into a unique field of the target.
func findCreated(p *model.Package, e *model.Entity, usable []string, data map[string]any) (*FindCreated, []string) {
	for _, ef := range e.ChangeRequest.Effects {
		if ef.Operation != model.EffectCreate {
			return nil, nil
		}
		te := p.EntityByID(ef.Target.Entity)
		var unique []string
		for _, c := range te.Constraints {
			if c.Kind != model.ConstraintUnique {
				continue
			}
			for _, sf := range ef.Set {
				if slices.Contains(c.Fields, sf.Field) && sf.FromField != "" {
					unique = append(unique, e.Field(sf.FromField).APIName)
				}
			}
		}
		for _, pr := range p.Profiles {
			g := pr.Grant(te.ID)
			if pr.Anonymous || !slices.Contains(usable, pr.ID) || g == nil || !allowsAll(g, model.OpList) {
				continue
			}
			for _, sf := range ef.Set {
				v, ok := data[apiName(e, sf.FromField)].(string)
				if sf.FromField == "" || !ok || !slices.Contains(g.FilterableFields, sf.Field) {
					continue
				}
				filter := fmt.Sprintf("%s eq '%s'", te.Field(sf.Field).APIName, strings.ReplaceAll(v, "'", "''"))
				return &FindCreated{Entity: te, Profile: pr.ID, Default: pr.Default, Filter: filter}, unique
			}
		}
		return nil, nil
	}
	return nil, nil
}

func apiName(e *model.Entity, field string) string {
	if f := e.Field(field); f != nil {
		return f.APIName
	}
	return ""
}
