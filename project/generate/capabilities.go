package generate

import (
	"fmt"
	"sort"
	"strings"

	"github.com/registrum/registrum/model"
)

// Capability is one feature of the record service, with the routes it
// brings, and whether this release's record host serves it.
//
// The compiler accepts every capability the specification describes, but
// the OpenAPI document lists only the routes of served capabilities, and the
// compiler warns about every declared use of one that is not served. Serving
// a capability is therefore one change here: flip Served, and the document
// and the warnings follow (the record host's router test then checks that
// the routes are really there).
type Capability struct {
	// ID names the capability in warnings and route listings.
	ID string
	// Title says what the capability is, for people.
	Title string
	// Served is true when the record host of this release serves the
	// capability's routes.
	Served bool
	// Declared says, for people, what in a project declares the capability.
	Declared string
}

// Capability ids.
const (
	// CapRecords is the ordinary record routes: list, create, read, patch,
	// tombstone and batch.
	CapRecords = "records"
	// CapMetadata is the registry document and the published documents.
	CapMetadata = "metadata"
	// CapRevisions is the revision history of a record.
	CapRevisions = "revisions"
	// CapTemporalReads is :current and :as-of on temporal entities.
	CapTemporalReads = "temporal-reads"
	// CapSnapshot is :snapshot reads.
	CapSnapshot = "snapshot"
	// CapIngestionRuns is the ingestion runs of batch entities.
	CapIngestionRuns = "ingestion-runs"
	// CapChangeRequests is the records of request entities and their
	// actions (submit, revise, cancel, apply).
	CapChangeRequests = "change-requests"
	// CapAttachments is the attachment slots of request entities.
	CapAttachments = "attachments"
	// CapImmediateActions is the immediate actions.
	CapImmediateActions = "immediate-actions"
	// CapGIS is the spatial adapter.
	CapGIS = "gis"
)

// capabilities is the one table of what the record host serves.
var capabilities = []Capability{
	{ID: CapRecords, Title: "record routes", Served: true, Declared: "an entity"},
	{ID: CapMetadata, Title: "registry metadata and published documents", Served: true, Declared: "always"},
	{ID: CapRevisions, Title: "revision history", Served: true, Declared: "a profile granting revisions"},
	{ID: CapTemporalReads, Title: "temporal reads (:current, :as-of)", Served: true, Declared: "temporal"},
	{ID: CapSnapshot, Title: "snapshot reads (:snapshot)", Served: true, Declared: "a profile granting snapshot"},
	{ID: CapIngestionRuns, Title: "ingestion runs", Served: true, Declared: "batch"},
	{ID: CapChangeRequests, Title: "change request records and actions", Served: true, Declared: "changeRequest"},
	{ID: CapAttachments, Title: "attachments", Served: true, Declared: "attachments"},
	{ID: CapImmediateActions, Title: "immediate actions", Served: true, Declared: "actions"},
	{ID: CapGIS, Title: "spatial adapter (GeoJSON)", Served: true, Declared: "geojson"},
}

// Capabilities returns the table of capabilities, in a fixed order.
func Capabilities() []Capability { return append([]Capability(nil), capabilities...) }

// CapabilityByID returns the capability with that id.
func CapabilityByID(id string) (Capability, bool) {
	for _, c := range capabilities {
		if c.ID == id {
			return c, true
		}
	}
	return Capability{}, false
}

// served reports whether the capability's routes are served.
func served(id string) bool {
	c, ok := CapabilityByID(id)
	return ok && c.Served
}

// UnservedUse is one declaration of a package whose routes the record host
// does not serve yet: they are left out of the OpenAPI document.
type UnservedUse struct {
	Capability Capability
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
		if o.capability == CapRevisions && !grantsOperation(p, o.entity, model.OpRevisions) {
			// Every entity has revision routes, but only a grant of
			// revisions declares that clients may use them.
			continue
		}
		k := key{o.capability, o.entity, o.action}
		g := groups[k]
		if g == nil {
			c, _ := CapabilityByID(o.capability)
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
	for i, c := range capabilities {
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
