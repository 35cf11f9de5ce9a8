package generate

import (
	"fmt"
	"sort"
	"strings"

	"github.com/registrum/registrum/model"
)

// serviceCapabilities returns the table of service capabilities the
// generator reads: the model's, replaced only by tests that take a
// capability out of service.
var serviceCapabilities = model.ServiceCapabilities

// capabilityByID returns the capability with that id from
// serviceCapabilities.
func capabilityByID(id string) (model.ServiceCapability, bool) {
	for _, c := range serviceCapabilities() {
		if c.ID == id {
			return c, true
		}
	}
	return model.ServiceCapability{}, false
}

// served reports whether the capability's routes are served.
func served(id string) bool {
	c, ok := capabilityByID(id)
	return ok && c.Served
}

// UnservedUse is one declaration of a package whose routes the record host
// does not serve yet: they are left out of the OpenAPI document.
type UnservedUse struct {
	Capability model.ServiceCapability
	// Entity is the entity that declares it, "" for a package-wide use.
	Entity string
	// Action is the immediate action that declares it.
	Action string
	// Routes are the routes left out, as "METHOD path".
	Routes []string
}

// Message says what is declared and not served, for a compiler warning.
func (u UnservedUse) Message() string {
	owner := "the registry"
	switch {
	case u.Entity != "":
		owner = "entity " + u.Entity
	case u.Action != "":
		owner = "action " + u.Action
	}
	return fmt.Sprintf("%s of %s: declared, not yet served by this host; its routes (%s) are left out of openapi.json and answer 404",
		u.Capability.Title, owner, strings.Join(u.Routes, ", "))
}

// Unserved returns every use the package declares of a capability the
// record host does not serve, by capability (in table order) then owner.
// A package-wide use (the spatial adapter's landing routes) is folded into
// the first entity that declares the capability.
func Unserved(p *model.Package) ([]UnservedUse, error) {
	ops, err := allOperations(p)
	if err != nil {
		return nil, err
	}
	type key struct{ capability, entity, action string }
	groups := map[key]*UnservedUse{}
	var order []key
	for _, o := range ops {
		if served(o.capability) {
			continue
		}
		if o.capability == model.CapRevisions && !grantsOperation(p, o.entity, model.OpRevisions) {
			// Every entity has revision routes, but only a grant of
			// revisions declares that clients may use them.
			continue
		}
		k := key{o.capability, o.entity, o.action}
		g := groups[k]
		if g == nil {
			c, _ := capabilityByID(o.capability)
			g = &UnservedUse{Capability: c, Entity: o.entity, Action: o.action}
			groups[k] = g
			order = append(order, k)
		}
		g.Routes = append(g.Routes, strings.ToUpper(o.method)+" "+o.path)
	}
	// Fold package-wide uses into the first owned use of the capability.
	for _, k := range order {
		if k.entity != "" || k.action != "" {
			continue
		}
		for _, o := range order {
			if o.capability == k.capability && (o.entity != "" || o.action != "") {
				groups[o].Routes = append(groups[k].Routes, groups[o].Routes...)
				delete(groups, k)
				break
			}
		}
	}
	rank := map[string]int{}
	for i, c := range serviceCapabilities() {
		rank[c.ID] = i
	}
	out := make([]UnservedUse, 0, len(groups))
	for _, k := range order {
		if g, ok := groups[k]; ok {
			sort.Strings(g.Routes)
			out = append(out, *g)
		}
	}
	sort.SliceStable(out, func(i, j int) bool {
		a, b := out[i], out[j]
		if a.Capability.ID != b.Capability.ID {
			return rank[a.Capability.ID] < rank[b.Capability.ID]
		}
		if a.Entity != b.Entity {
			return a.Entity < b.Entity
		}
		return a.Action < b.Action
	})
	return out, nil
}
