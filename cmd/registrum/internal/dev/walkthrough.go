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
	w := &Walkthrough{Entity: e, Profile: pr.ID, Default: pr.Default, Claims: map[string]string{}}
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
func (w *Walkthrough) query() string {
	if w.Default {
		return ""
	}
	return "?" + url.Values{"accessProfile": {w.Profile}}.Encode()
}
