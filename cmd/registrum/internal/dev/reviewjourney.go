package dev

import (
	"fmt"
	"io"
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

// print writes the reviewed journey's commands and the desk step between
// submit and apply. Placeholders in angle brackets come from earlier answers.
func (j *ReviewedJourney) print(w io.Writer, base, auth string, rd *reviewDesk) {
	e, q, aq := j.Entity, profileQuery(j.Profile, j.Default), profileQuery(j.ApplyProfile, j.ApplyDefault)
	cr := e.ChangeRequest
	id := "<" + e.ID + " id>"
	fmt.Fprintf(w, "Change records through a reviewed request: %s (profile %s), reviewed in the review desk (authority %s, policy %s), applied by you (profile %s).\n",
		e.ID, j.Profile, cr.Review.Authority, cr.Review.PolicyID, j.ApplyProfile)
	if len(j.Setup) > 0 {
		fmt.Fprintf(w, "First create the records it refers to; each answer's data.recordIdentifier is the <… id> of the commands after it:\n")
		for _, rec := range j.Setup {
			fmt.Fprintf(w, "  curl -sS -X POST '%s/v1/records/%s%s' %s -H 'Content-Type: application/json' -d '%s'\n", base, rec.Entity.Route, profileQuery(rec.Profile, rec.Default), auth, rec.Body)
		}
		fmt.Fprintln(w)
	}
	fmt.Fprintf(w, "Draft the request; its data.recordIdentifier is the %s below:\n", id)
	fmt.Fprintf(w, "  curl -sS -X POST '%s/v1/records/%s%s' %s -H 'Content-Type: application/json' -d '%s'\n", base, e.Route, q, auth, j.Draft)
	if len(j.Unique) > 0 && j.Find != nil {
		fmt.Fprintf(w, "  (%s becomes unique in the %s it creates: change it to run the journey again)\n", strings.Join(j.Unique, ", "), j.Find.Entity.ID)
	}
	fmt.Fprintln(w)
	fmt.Fprintf(w, "Read it for its submit_request action (href and ifMatch):\n")
	fmt.Fprintf(w, "  curl -sS '%s/v1/records/%s/%s%s' %s\n\n", base, e.Route, id, q, auth)
	if s := j.Slot; s != nil {
		fmt.Fprintf(w, "Attach the required %s (%s, at most %d bytes) under the draft's ETag (the submit_request ifMatch), then read the draft again for the new ifMatch:\n", s.ID, j.SlotType, s.MaximumBytes)
		fmt.Fprintf(w, "  curl -sS -X PATCH '%s/v1/records/%s/%s/attachments/%s%s' %s -H 'If-Match: <submit_request ifMatch>' -H 'Idempotency-Key: attach-%s' -H 'Content-Type: %s' --data-binary '%s'\n",
			base, e.Route, id, s.ID, q, auth, id, j.SlotType, reviewedAttachment)
		fmt.Fprintf(w, "  curl -sS '%s/v1/records/%s/%s%s' %s\n\n", base, e.Route, id, q, auth)
	}
	fmt.Fprintf(w, "Submit it; the record host sends the frozen proposal (with its attachments' manifest) to the review desk:\n")
	fmt.Fprintf(w, "  curl -sS -X POST '%s<submit_request href>' %s -H 'If-Match: <submit_request ifMatch>' -H 'Idempotency-Key: submit-%s' -H 'Content-Type: application/json' -d '{\"actorReference\":%q}'\n\n", base, auth, id, journeyActor)
	fmt.Fprintf(w, "Approve it in the review desk: open %s in a browser, sign in with the password in %s, open the %s request of record %s, and press Approve.\n\n", rd.Config.PublicURL, rd.PasswordFile, e.ID, id)
	fmt.Fprintf(w, "Read it as its applier until data.request.review.result.state is approved (the host asks the desk every %d seconds); apply_request is then offered:\n", reviewPollSeconds)
	fmt.Fprintf(w, "  curl -sS '%s/v1/records/%s/%s%s' %s\n\n", base, e.Route, id, aq, auth)
	fmt.Fprintf(w, "Apply it through the apply_request action (the host asks the desk again that the approval holds):\n")
	fmt.Fprintf(w, "  curl -sS -X POST '%s<apply_request href>' %s -H 'If-Match: <apply_request ifMatch>' -H 'Idempotency-Key: apply-%s' -H 'Content-Type: application/json' -d '{\"actorReference\":%q,\"proposalVersion\":<apply_request proposalVersion>,\"effectDigest\":\"<apply_request effectDigest>\"}'\n\n", base, auth, id, journeyActor)
	if rec := j.Changed; rec != nil {
		fmt.Fprintf(w, "Read the %s it changes (before the apply, data.requestPresence names the pending request):\n", rec.Entity.ID)
		fmt.Fprintf(w, "  curl -sS '%s/v1/records/%s/%s%s' %s\n\n", base, rec.Entity.Route, rec.Placeholder, profileQuery(rec.Profile, rec.Default), auth)
	}
	if f := j.Find; f != nil {
		fmt.Fprintf(w, "Find the %s it created:\n", f.Entity.ID)
		fmt.Fprintf(w, "  curl -sS -G '%s/v1/records/%s%s' %s --data-urlencode \"\\$filter=%s\"\n\n", base, f.Entity.Route, profileQuery(f.Profile, f.Default), auth, f.Filter)
	}
}
