package project

import (
	"fmt"
	"slices"
	"strings"

	"github.com/registrum/registrum/model"
)

// readOnlyOps are the operations an anonymous profile may grant.
var readOnlyOps = []string{model.OpGet, model.OpList, model.OpRevisions, model.OpSnapshot}

var requestOps = []string{model.OpSubmitRequest, model.OpReviseRequest, model.OpCancelRequest, model.OpApplyRequest}

// profile resolves one access profile.
func (c *compiler) profile(pr *Profile, pp string) *model.Profile {
	out := &model.Profile{ID: pr.ID, Default: pr.Default, Anonymous: pr.Anonymous,
		RequiredScopes: pr.RequiredScopes, RequiredPurposes: pr.RequiredPurposes, PrincipalClaim: pr.PrincipalClaim}
	if pr.Anonymous {
		for key, set := range map[string]bool{"requiredScopes": pr.RequiredScopes != nil, "requiredPurposes": pr.RequiredPurposes != nil, "principalClaim": pr.PrincipalClaim != ""} {
			if set {
				c.add(pp+"."+key, "profile.anonymous", "an anonymous profile admits requests without a token, so it has no %s", key)
			}
		}
	} else {
		if len(pr.RequiredScopes) == 0 {
			c.add(pp, "profile.scopes", "a profile that is not anonymous needs requiredScopes, a nonempty list")
		}
		if pr.RequiredPurposes != nil && len(pr.RequiredPurposes) == 0 {
			c.add(pp+".requiredPurposes", "profile.scopes", "requiredPurposes, when given, is a nonempty list")
		}
		out.PrincipalClaim = or(pr.PrincipalClaim, "sub")
	}
	c.distinct(pr.RequiredScopes, pp+".requiredScopes", "scope")
	c.distinct(pr.RequiredPurposes, pp+".requiredPurposes", "purpose")
	if len(pr.Grants) == 0 && len(pr.ActionGrants) == 0 {
		c.add(pp, "profile.grants", "profile %q grants nothing: add grants or actionGrants", pr.ID)
	}
	seen := map[string]string{}
	for i, g := range pr.Grants {
		gp := fmt.Sprintf("%s.grants[%d]", pp, i)
		if first, dup := seen[g.Entity]; dup {
			c.add(gp+".entity", "identifier.duplicate", "profile %q already grants entity %q at %s; one grant per entity", pr.ID, g.Entity, c.where(first))
			continue
		}
		seen[g.Entity] = gp + ".entity"
		if mg := c.grant(pr, g, gp); mg != nil {
			out.Grants = append(out.Grants, mg)
		}
	}
	seenActions := map[string]bool{}
	for i, ag := range pr.ActionGrants {
		ap := fmt.Sprintf("%s.actionGrants[%d]", pp, i)
		if seenActions[ag.Action] {
			c.add(ap+".action", "identifier.duplicate", "profile %q already grants action %q", pr.ID, ag.Action)
			continue
		}
		seenActions[ag.Action] = true
		if pr.Anonymous {
			c.add(ap, "profile.anonymous", "an anonymous profile cannot invoke actions")
		}
		if mg := c.actionGrant(ag, ap); mg != nil {
			out.ActionGrants = append(out.ActionGrants, mg)
		}
	}
	return out
}

func (c *compiler) distinct(list []string, p, what string) {
	seen := map[string]bool{}
	for i, v := range list {
		if v == "" {
			c.add(fmt.Sprintf("%s[%d]", p, i), "profile.scopes", "empty %s", what)
		}
		if seen[v] {
			c.add(fmt.Sprintf("%s[%d]", p, i), "profile.scopes", "%s %q is listed twice", what, v)
		}
		seen[v] = true
	}
}

// grant resolves one entity grant: every field it names must be a declared
// field (or slot) of the entity, by authored id.
func (c *compiler) grant(pr *Profile, g *Grant, gp string) *model.Grant {
	e := c.pkg.EntityByID(g.Entity)
	if e == nil {
		c.add(gp+".entity", "grant.entity", "entity %q is not declared", g.Entity)
		return nil
	}
	out := &model.Grant{Entity: e.ID, Operations: g.Operations, AllowCount: g.AllowCount,
		RequestVisibility: g.RequestVisibility, ReadableRequestFields: g.ReadableRequestFields, ProvenanceFields: g.ProvenanceFields}
	c.distinct(g.Operations, gp+".operations", "operation")
	for i, op := range g.Operations {
		op_ := fmt.Sprintf("%s.operations[%d]", gp, i)
		switch {
		case pr.Anonymous && !slices.Contains(readOnlyOps, op):
			c.add(op_, "profile.anonymous", "an anonymous profile grants reads only (%s); %s is refused", strings.Join(readOnlyOps, ", "), op)
		case op == model.OpPatch && e.MutationMode == model.CreateOnly:
			c.add(op_, "grant.operation", "entity %q is create-only: patch cannot be granted", e.ID)
		case op == model.OpTombstone && !e.Tombstone:
			c.add(op_, "grant.operation", "tombstone needs entity %q to set tombstone: true", e.ID)
		case op == model.OpBatch && e.Batch == nil:
			c.add(op_, "grant.operation", "batch needs entity %q to declare batch bounds", e.ID)
		case slices.Contains(requestOps, op) && !e.IsRequestEntity():
			c.add(op_, "grant.operation", "%s needs a change request entity; %q declares no changeRequest", op, e.ID)
		}
	}
	out.ReadableFields = c.grantFields(e, g.ReadableFields, gp+".readableFields", "readable field", true)
	out.WritableFields = c.grantFields(e, g.WritableFields, gp+".writableFields", "writable field", true)
	out.FilterableFields = c.grantFields(e, g.FilterableFields, gp+".filterableFields", "filterable field", false)
	out.SortableFields = c.grantFields(e, g.SortableFields, gp+".sortableFields", "sortable field", false)
	for i, n := range g.FilterableFields {
		if f := e.Field(n); f != nil && (f.Type == model.TypeText || f.Type == model.TypeStructured || f.Type == model.TypeCRS84Point) {
			c.add(fmt.Sprintf("%s.filterableFields[%d]", gp, i), "grant.fields", "%s field cannot be filtered; use bbox for points", an(f.Type))
		}
	}
	for i, n := range g.SortableFields {
		if f := e.Field(n); f != nil && (f.Type == model.TypeText || f.Type == model.TypeStructured || f.Type == model.TypeCRS84Point || f.Type == model.TypeBoolean) {
			c.add(fmt.Sprintf("%s.sortableFields[%d]", gp, i), "grant.fields", "%s field cannot be sorted", an(f.Type))
		}
	}
	if len(g.WritableFields) > 0 && !containsAny(g.Operations, model.OpCreate, model.OpPatch, model.OpBatch) {
		c.add(gp+".writableFields", "grant.fields", "writableFields needs a create, patch or batch operation")
	}
	if len(g.FilterableFields)+len(g.SortableFields) > 0 || g.AllowCount {
		if !containsAny(g.Operations, model.OpList, model.OpSnapshot) {
			c.add(gp, "grant.fields", "filterableFields, sortableFields and allowCount need a list or snapshot operation")
		}
	}
	if len(g.ReadableRequestFields) > 0 {
		if pr.Anonymous {
			c.add(gp+".readableRequestFields", "grant.request-fields", "readableRequestFields require a non-anonymous profile")
		} else if !e.IsRequestEntity() {
			c.add(gp+".readableRequestFields", "grant.request-fields", "readableRequestFields apply to change request entities; %q declares no changeRequest", e.ID)
		}
	}
	if g.RequestVisibility != "" && !e.IsRequestEntity() {
		c.add(gp+".requestVisibility", "grant.request-fields", "requestVisibility applies to change request entities")
	}
	if len(g.ProvenanceFields) > 0 && !slices.Contains(g.Operations, model.OpRevisions) {
		c.add(gp+".provenanceFields", "grant.provenance", "provenanceFields show correction context on revisions: the grant needs the revisions operation")
	}
	out.RowBoundaries = c.rowBoundaries(e, g.RowBoundaries, gp+".rowBoundaries", pr.Anonymous)
	for i, rp := range g.RequestPresence {
		pp := fmt.Sprintf("%s.requestPresence[%d]", gp, i)
		re := c.pkg.EntityByID(rp.RequestEntity)
		if re == nil || !re.IsRequestEntity() {
			c.add(pp+".requestEntity", "grant.request-presence", "requestEntity %q is not a change request entity", rp.RequestEntity)
			continue
		}
		out.RequestPresence = append(out.RequestPresence, &model.RequestPresence{RequestEntity: re.ID,
			RowBoundaries: c.rowBoundaries(re, rp.RowBoundaries, pp+".rowBoundaries", pr.Anonymous)})
	}
	if len(g.ApplyTargets) > 0 && !slices.Contains(g.Operations, model.OpApplyRequest) {
		c.add(gp+".applyTargets", "grant.apply-targets", "applyTargets needs the apply_request operation")
	}
	for i, t := range g.ApplyTargets {
		if mt := c.target(t, fmt.Sprintf("%s.applyTargets[%d]", gp, i), pr.Anonymous); mt != nil {
			out.ApplyTargets = append(out.ApplyTargets, mt)
		}
	}
	return out
}

func containsAny(list []string, vals ...string) bool {
	for _, v := range vals {
		if slices.Contains(list, v) {
			return true
		}
	}
	return false
}

func (c *compiler) grantFields(e *model.Entity, names []string, p, role string, slots bool) []string {
	c.fieldList(e, names, p, role, slots)
	return names
}

func (c *compiler) rowBoundaries(e *model.Entity, rb *RowBoundaries, p string, anonymous bool) model.RowBoundaries {
	if rb == nil {
		return model.RowBoundaries{}
	}
	if rb.Unrestricted {
		return model.RowBoundaries{Unrestricted: true}
	}
	out := model.RowBoundaries{}
	if anonymous {
		c.add(p, "grant.row-boundaries", "an anonymous profile has no token claims: its row boundaries must be unrestricted")
		return out
	}
	for i, r := range rb.Rules {
		rp := fmt.Sprintf("%s[%d]", p, i)
		op := or(r.Operator, model.BoundaryEquals)
		if f := c.fieldRef(e, r.Field, rp+".field", "boundary field"); f != nil {
			if f.Type == model.TypeText || f.Type == model.TypeStructured || f.Type == model.TypeCRS84Point || f.Type == model.TypeBoolean {
				c.add(rp+".field", "grant.row-boundaries", "%s field cannot bound rows", an(f.Type))
			}
		}
		out.Rules = append(out.Rules, &model.RowRule{Field: r.Field, Claim: r.Claim, Operator: op})
	}
	return out
}

func (c *compiler) target(t *Target, p string, anonymous bool) *model.Target {
	e := c.pkg.EntityByID(t.Entity)
	if e == nil {
		c.add(p+".entity", "grant.entity", "entity %q is not declared", t.Entity)
		return nil
	}
	return &model.Target{Entity: e.ID, RowBoundaries: c.rowBoundaries(e, t.RowBoundaries, p+".rowBoundaries", anonymous)}
}

func (c *compiler) actionGrant(ag *ActionGrant, ap string) *model.ActionGrant {
	a := c.pkg.ActionByID(ag.Action)
	if a == nil {
		c.add(ap+".action", "grant.action", "action %q is not declared", ag.Action)
		return nil
	}
	out := &model.ActionGrant{Action: a.ID, Operations: ag.Operations}
	covered := map[string]bool{}
	for i, t := range ag.Targets {
		tp := fmt.Sprintf("%s.targets[%d]", ap, i)
		if covered[t.Entity] {
			c.add(tp+".entity", "identifier.duplicate", "entity %q is already a target", t.Entity)
			continue
		}
		if mt := c.target(t, tp, false); mt != nil {
			covered[mt.Entity] = true
			out.Targets = append(out.Targets, mt)
		}
	}
	// The targets' row boundaries apply to every record an effect reaches.
	for _, ef := range a.Effects {
		if ef.Target.Entity != "" && !covered[ef.Target.Entity] {
			c.add(ap+".targets", "grant.action-targets", "action %q reaches entity %q (effect %q); list it in targets with its row boundaries", a.ID, ef.Target.Entity, ef.ID)
			covered[ef.Target.Entity] = true
		}
	}
	return out
}

// defaultProfiles checks that each route has at most one default profile.
func (c *compiler) defaultProfiles() {
	first := map[string]string{}
	for i, pr := range c.pkg.Profiles {
		if !pr.Default {
			continue
		}
		for _, g := range pr.Grants {
			if prev, dup := first[g.Entity]; dup {
				c.add(fmt.Sprintf("profiles[%d].default", i), "profile.default", "route of entity %q already has default profile %q; a route has one default profile", g.Entity, prev)
				continue
			}
			first[g.Entity] = pr.ID
		}
	}
}
