package dev

import (
	"encoding/json"
	"fmt"
	"net/url"
	"slices"
	"strings"

	"github.com/registrum/registrum/model"
)

// Walkthrough is what `registrum dev` shows a newcomer: one entity the
// standard demo client can create, patch and list with a filter through one
// profile, the sample requests, and the claims the demo client needs.
type Walkthrough struct {
	Entity *model.Entity
	// Profile is passed as accessProfile when it is not the route's default.
	Profile string
	Default bool
	// Create holds two create bodies: the list then has a second page.
	Create [2]string
	// Patch is a JSON Patch of one writable field.
	Patch string
	// Filter is a $filter on a filterable field that both records match.
	Filter string
	// Claims are the direct claims the demo client needs (purpose, row boundaries).
	Claims map[string]string
	// PurposeClaim names the purpose claim, when the profile requires one.
	PurposeClaim string
	// Snapshot is set when the profile grants snapshot reads of the entity:
	// the walkthrough then reads the state just after the patch.
	Snapshot bool
}

// planWalkthrough picks the first entity and profile the demo client can use
// for a create, a patch and a filtered, paged list. Request entities are left
// out: their records are change requests.
func planWalkthrough(p *model.Package) *Walkthrough {
	for _, pr := range p.Profiles {
		if pr.Anonymous {
			continue
		}
		for _, g := range pr.Grants {
			e := p.EntityByID(g.Entity)
			if e == nil || e.IsRequestEntity() || e.MutationMode != model.Mutable {
				continue
			}
			if w := tryGrant(p, pr, g, e); w != nil {
				return w
			}
		}
	}
	return nil
}

func tryGrant(p *model.Package, pr *model.Profile, g *model.Grant, e *model.Entity) *Walkthrough {
	for _, op := range []string{model.OpCreate, model.OpPatch, model.OpList} {
		if !g.Allows(op) {
			return nil
		}
	}
	for _, c := range e.Constraints {
		if c.Kind == model.ConstraintUnique || c.Kind == model.ConstraintTemporalNonOverlap {
			return nil // two identical creates must both succeed
		}
	}
	w := &Walkthrough{Entity: e, Profile: pr.ID, Default: pr.Default, Claims: map[string]string{}, Snapshot: g.Allows(model.OpSnapshot)}
	if len(pr.RequiredPurposes) > 0 {
		w.PurposeClaim = "purpose"
		w.Claims["purpose"] = pr.RequiredPurposes[0]
	}
	data := map[string]any{}
	for _, f := range e.Fields {
		if !f.Required {
			continue
		}
		if !g.CanWrite(f.ID) {
			return nil
		}
		v, ok := sampleValue(f, 0)
		if !ok {
			return nil
		}
		data[f.APIName] = v
	}
	if !g.RowBoundaries.Unrestricted {
		for _, r := range g.RowBoundaries.Rules {
			f := e.Field(r.Field)
			v, has := data[f.APIName]
			// One sample is also an "in" claim: a space-delimited list of one.
			s := fmt.Sprint(v)
			if !has || strings.Contains(r.Claim, ".") || (r.Operator == model.BoundaryIn && strings.Contains(s, " ")) {
				return nil
			}
			w.Claims[r.Claim] = s
		}
	}
	// A filter on a filterable field both records share.
	for _, f := range e.Fields {
		v, has := data[f.APIName]
		if !has || !slices.Contains(g.FilterableFields, f.ID) {
			continue
		}
		switch x := v.(type) {
		case string:
			w.Filter = fmt.Sprintf("%s eq '%s'", f.APIName, strings.ReplaceAll(x, "'", "''"))
		case int64, bool:
			w.Filter = fmt.Sprintf("%s eq %v", f.APIName, x)
		}
		if w.Filter != "" {
			break
		}
	}
	if w.Filter == "" {
		return nil
	}
	// A patch of a writable field that no boundary or filter depends on.
	for _, f := range e.Fields {
		if !g.CanWrite(f.ID) || strings.HasPrefix(w.Filter, f.APIName+" ") || boundsField(g, f.ID) {
			continue
		}
		v, ok := sampleValue(f, 1)
		if !ok {
			continue
		}
		b, _ := json.Marshal([]map[string]any{{"op": "add", "path": "/data/" + f.APIName, "value": v}})
		w.Patch = string(b)
		break
	}
	if w.Patch == "" {
		return nil
	}
	body, _ := json.Marshal(map[string]any{"data": data})
	w.Create = [2]string{string(body), string(body)}
	return w
}

func boundsField(g *model.Grant, fieldID string) bool {
	return slices.ContainsFunc(g.RowBoundaries.Rules, func(r *model.RowRule) bool { return r.Field == fieldID })
}

// query returns the accessProfile query of the walkthrough's profile, "" for the default.
func (w *Walkthrough) query() string { return profileQuery(w.Profile, w.Default) }

// RequestJourney is the change-request part of the walkthrough: the records
// a request refers to, created first; a draft of the request; then its
// submit and apply through the actions the draft offers, and a read of the
// record it changed. Only requests reviewed by no one (review mode none)
// and applied by a person qualify; requests reviewed by an authority go
// through the review desk (ReviewedJourney).
type RequestJourney struct {
	Entity  *model.Entity
	Profile string
	Default bool
	// Setup creates the records the draft refers to, in order.
	Setup []*SetupRecord
	// Draft is the create body of the draft; it names setup records by placeholder.
	Draft string
	// Changed is the setup record the request patches (read at the end), or nil.
	Changed *SetupRecord
	// PlannerPath is the planner module's file in the package, "" for declared effects.
	PlannerPath string
	// Slot is the attachment slot the journey fills before submitting (the
	// first one the profile may write), nil when there is none; SlotType is
	// the media type it uploads.
	Slot     *model.AttachmentSlot
	SlotType string
	// Action is the immediate action run on a record the setup made, nil
	// when the demo client may invoke none.
	Action *ActionStep
}

// ActionStep is the immediate-action part of the walkthrough: an action
// whose required inputs all name records the journey's setup creates, its
// target-conditions read and its invocation under the ifMatch of its first
// patch effect.
type ActionStep struct {
	Action  *model.Action
	Profile string
	Default bool
	// Input is the {"input": {...}} body, naming setup records by placeholder.
	Input map[string]any
	// Effect is the patch effect whose ifMatch the invocation names.
	Effect string
}

// planAction picks the first action a usable profile may invoke whose
// required inputs are references to records the setup made.
func planAction(p *model.Package, usable []string, made map[string]*SetupRecord) *ActionStep {
	for _, a := range p.Actions {
		for _, pr := range p.Profiles {
			if pr.Anonymous || !slices.Contains(usable, pr.ID) {
				continue
			}
			for _, g := range pr.ActionGrants {
				if g.Action != a.ID || !slices.Contains(g.Operations, model.OpInvoke) {
					continue
				}
				in, ok := map[string]any{}, true
				for _, f := range a.Inputs {
					rec := made[f.Target]
					switch {
					case f.Type == model.TypeReference && rec != nil:
						in[f.APIName] = rec.Placeholder
					case f.Required:
						ok = false
					}
				}
				effect := ""
				for _, ef := range a.Effects {
					if ef.Operation == model.EffectPatch && ef.Target.FromField != "" && effect == "" {
						effect = ef.ID
					}
				}
				if ok && effect != "" && a.Handler == nil {
					return &ActionStep{Action: a, Profile: pr.ID, Default: pr.Default, Input: in, Effect: effect}
				}
			}
		}
	}
	return nil
}

// placeholderJSON encodes v with placeholders' angle brackets as written.
func placeholderJSON(v any) string {
	var b strings.Builder
	enc := json.NewEncoder(&b)
	enc.SetEscapeHTML(false)
	enc.Encode(v)
	return strings.TrimSuffix(b.String(), "\n")
}

// journeySlot picks the first slot of e the grant may write and read whose
// uploads dev can verify (no verifier, or one dev serves), and the media
// type to upload to it (text/plain when allowed).
func journeySlot(p *model.Package, e *model.Entity, g *model.Grant) (*model.AttachmentSlot, string) {
	for _, s := range e.Attachments {
		if !slices.Contains(g.WritableFields, s.ID) || !slices.Contains(g.ReadableFields, s.ID) || !slotServed(p, s) {
			continue
		}
		if slices.Contains(s.ContentTypes, "text/plain") {
			return s, "text/plain"
		}
		return s, s.ContentTypes[0]
	}
	return nil, ""
}

// journeyAttachment is the content the walkthrough uploads.
const journeyAttachment = "Letter from the school confirming the new address."

// placeholderBody is the create body {"data": data}, its placeholders'
// angle brackets written as they are (not as \u003c).
func placeholderBody(data map[string]any) string {
	var b strings.Builder
	enc := json.NewEncoder(&b)
	enc.SetEscapeHTML(false)
	enc.Encode(map[string]any{"data": data})
	return strings.TrimSuffix(b.String(), "\n")
}

// SetupRecord is one record created before the draft, named in later
// bodies by its placeholder.
type SetupRecord struct {
	Entity  *model.Entity
	Profile string
	Default bool
	Body    string
	// Placeholder stands for the record's id in later commands: "<case id>".
	Placeholder string
	// Unique fields make the printed create succeed only once.
	Unique []string
}

// maximumSetupDepth bounds the chain of references the journey follows.
const maximumSetupDepth = 4

// planRequestJourney picks the first request entity the standard demo client
// can create, submit and apply under one of the profiles it satisfies
// (usable), with review mode none and manual application; the draft sets
// every writable field it can sample, references naming setup records.
func planRequestJourney(p *model.Package, usable []string, claims map[string]string) *RequestJourney {
	for _, pr := range p.Profiles {
		if pr.Anonymous || !slices.Contains(usable, pr.ID) {
			continue
		}
		for _, g := range pr.Grants {
			e := p.EntityByID(g.Entity)
			if e == nil || !e.IsRequestEntity() || e.ChangeRequest.Review.Mode != model.ReviewNone || e.ChangeRequest.Application.Mode != model.ApplyManual {
				continue
			}
			if !allowsAll(g, model.OpCreate, model.OpGet, model.OpSubmitRequest, model.OpApplyRequest) || !g.RowBoundaries.Unrestricted {
				continue
			}
			jp := &journeyPlanner{p: p, usable: usable, claims: claims, made: map[string]*SetupRecord{}}
			data, ok := jp.values(e, g, true, 0)
			if !ok {
				continue
			}
			j := &RequestJourney{Entity: e, Profile: pr.ID, Default: pr.Default, Setup: jp.setup, Draft: placeholderBody(data)}
			j.Slot, j.SlotType = journeySlot(p, e, g)
			j.Action = planAction(p, usable, jp.made)
			if pl := e.ChangeRequest.Planner; pl != nil {
				if m := p.ModuleByID(pl.Module); m != nil {
					j.PlannerPath = m.Path
				}
			}
			if f := e.Field(changedField(e.ChangeRequest)); f != nil {
				j.Changed = jp.made[f.Target]
			}
			return j
		}
	}
	return nil
}

// changedField is the request field naming the record the request's first
// patch changes, "" when none does.
func changedField(cr *model.ChangeRequest) string {
	if cr.Planner != nil {
		for _, w := range cr.Planner.Writes {
			if w.Operation == model.EffectPatch && w.Target.FromField != "" {
				return w.Target.FromField
			}
		}
		return ""
	}
	for _, ef := range cr.Effects {
		if ef.Operation == model.EffectPatch && ef.Target.FromField != "" {
			return ef.Target.FromField
		}
	}
	return ""
}

func allowsAll(g *model.Grant, ops ...string) bool {
	return !slices.ContainsFunc(ops, func(op string) bool { return !g.Allows(op) })
}

type journeyPlanner struct {
	p      *model.Package
	usable []string
	claims map[string]string
	made   map[string]*SetupRecord
	setup  []*SetupRecord
}

// values samples the fields of a body: every required field, and with all
// every writable one that can be sampled (variant 1, so that a change
// differs from what a setup record holds). A reference names a setup record
// of its target, created first.
func (jp *journeyPlanner) values(e *model.Entity, g *model.Grant, all bool, depth int) (map[string]any, bool) {
	data := map[string]any{}
	for _, f := range e.Fields {
		if !f.Required && (!all || !g.CanWrite(f.ID)) {
			continue
		}
		if !g.CanWrite(f.ID) {
			return nil, false
		}
		if f.Type == model.TypeReference {
			rec := jp.record(f.Target, depth+1)
			if rec == nil {
				if f.Required {
					return nil, false
				}
				continue
			}
			data[f.APIName] = rec.Placeholder
			continue
		}
		variant := 0
		if all {
			variant = 1
		}
		v, ok := sampleValue(f, variant)
		if !ok {
			if f.Required {
				return nil, false
			}
			continue
		}
		data[f.APIName] = v
	}
	return data, true
}

// record plans the create of a record of entity id (once), through the
// first usable profile whose grant creates it within the demo client's
// claims.
func (jp *journeyPlanner) record(id string, depth int) *SetupRecord {
	if rec, ok := jp.made[id]; ok {
		return rec
	}
	e := jp.p.EntityByID(id)
	if e == nil || e.IsRequestEntity() || depth > maximumSetupDepth {
		return nil
	}
	for _, pr := range jp.p.Profiles {
		g := pr.Grant(id)
		if pr.Anonymous || !slices.Contains(jp.usable, pr.ID) || g == nil || !allowsAll(g, model.OpCreate, model.OpGet) {
			continue
		}
		data, ok := jp.values(e, g, false, depth)
		if !ok || !jp.withinBoundaries(e, g, data) {
			continue
		}
		rec := &SetupRecord{Entity: e, Profile: pr.ID, Default: pr.Default, Body: placeholderBody(data), Placeholder: "<" + e.ID + " id>"}
		// A unique constraint over a reference to a fresh setup record holds
		// on every run; one over sampled values only holds once.
		for _, c := range e.Constraints {
			if c.Kind != model.ConstraintUnique || slices.ContainsFunc(c.Fields, func(f string) bool { return e.Field(f).Type == model.TypeReference }) {
				continue
			}
			for _, f := range c.Fields {
				rec.Unique = append(rec.Unique, e.Field(f).APIName)
			}
		}
		jp.made[id] = rec
		jp.setup = append(jp.setup, rec)
		return rec
	}
	return nil
}

// withinBoundaries reports whether the demo client's claims let it create
// a record holding data under g's row boundaries.
func (jp *journeyPlanner) withinBoundaries(e *model.Entity, g *model.Grant, data map[string]any) bool {
	if g.RowBoundaries.Unrestricted {
		return true
	}
	for _, r := range g.RowBoundaries.Rules {
		f := e.Field(r.Field)
		if f == nil {
			return false
		}
		v, claim := fmt.Sprint(data[f.APIName]), jp.claims[r.Claim]
		if r.Operator == model.BoundaryIn && !slices.Contains(strings.Fields(claim), v) || r.Operator != model.BoundaryIn && claim != v {
			return false
		}
	}
	return true
}

// profileQuery returns the accessProfile query for a profile, "" for the default.
func profileQuery(profile string, isDefault bool) string {
	if isDefault {
		return ""
	}
	return "?" + url.Values{"accessProfile": {profile}}.Encode()
}

// GISStep is the spatial adapter part of the walkthrough: a record with a
// point, created through a profile the standard demo client satisfies, then
// read back as GeoJSON inside a bounding box around the point, through an
// anonymous profile when one may list the entity's points.
type GISStep struct {
	Entity *model.Entity
	// Create is the record created first.
	Create *SetupRecord
	// Reader is the profile of the GeoJSON reads; ReaderDefault when it is
	// the route's default; Anonymous when it needs no token.
	Reader        string
	ReaderDefault bool
	Anonymous     bool
	// BBox is west,south,east,north around the sample point.
	BBox string
}

// planGIS picks the first entity served on the spatial adapter whose record
// the standard demo client can create (usable profiles, its claims) and
// whose points some profile may list: an anonymous one first, else one the
// demo client satisfies.
func planGIS(p *model.Package, usable []string, claims map[string]string) *GISStep {
	for _, e := range p.Entities {
		if e.GeoJSON == nil || e.IsRequestEntity() {
			continue
		}
		step := &GISStep{Entity: e}
		for _, anonymous := range []bool{true, false} {
			for _, pr := range p.Profiles {
				g := pr.Grant(e.ID)
				if step.Reader != "" || pr.Anonymous != anonymous || g == nil || !g.Allows(model.OpList) || !g.CanRead(e.GeoJSON.GeometryField) {
					continue
				}
				if !anonymous && (!slices.Contains(usable, pr.ID) || !g.RowBoundaries.Unrestricted) {
					continue
				}
				step.Reader, step.ReaderDefault, step.Anonymous = pr.ID, pr.Default && onlyDefault(p, e.ID, pr.ID), anonymous
			}
		}
		if step.Reader == "" {
			continue
		}
		jp := &journeyPlanner{p: p, usable: usable, claims: claims, made: map[string]*SetupRecord{}}
		rec := jp.record(e.ID, 0)
		if rec == nil || len(jp.setup) != 1 {
			continue // a record that needs others first is left to the journey
		}
		var body struct {
			Data map[string]any `json:"data"`
		}
		if json.Unmarshal([]byte(rec.Body), &body) != nil {
			continue
		}
		pt, ok := body.Data[e.Field(e.GeoJSON.GeometryField).APIName].(map[string]any)
		if !ok {
			continue
		}
		c, _ := pt["coordinates"].([]any)
		if len(c) != 2 {
			continue
		}
		lon, _ := c[0].(float64)
		lat, _ := c[1].(float64)
		step.Create = rec
		step.BBox = fmt.Sprintf("%g,%g,%g,%g", max(lon-1, -180), max(lat-1, -90), min(lon+1, 180), min(lat+1, 90))
		return step
	}
	return nil
}

// onlyDefault reports whether profile id is the one default profile of the
// entity's routes.
func onlyDefault(p *model.Package, entity, id string) bool {
	for _, pr := range p.Profiles {
		if pr.ID != id && pr.Default && pr.Grant(entity) != nil {
			return false
		}
	}
	return true
}

// withQuery adds a query parameter to a query string that may be empty.
func withQuery(q, param string) string {
	if q == "" {
		return "?" + param
	}
	return q + "&" + param
}
