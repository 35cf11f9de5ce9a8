package metadata

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"

	"github.com/registrum/registrum/host/access"
	"github.com/registrum/registrum/host/problem"
	"github.com/registrum/registrum/model"
)

// RegistryDocument is GET /v1/registry: the registry as the caller's
// profile sees it. It describes; it grants nothing.
type RegistryDocument struct {
	Registry          RegistryIdentity `json:"registry"`
	PackageRevision   string           `json:"packageRevision"`
	SchemaFingerprint string           `json:"schemaFingerprint"`
	Entities          []EntityEntry    `json:"entities"`
}

// RegistryIdentity identifies the registry.
type RegistryIdentity struct {
	ID               string `json:"id"`
	Version          string `json:"version"`
	Language         string `json:"language"`
	CanonicalBaseIRI string `json:"canonicalBaseIri"`
}

// EntityEntry is one entity the caller may use.
type EntityEntry struct {
	ID           string             `json:"id"`
	Route        string             `json:"route"`
	Dataset      string             `json:"dataset"`
	Schema       string             `json:"schema"`
	MutationMode model.MutationMode `json:"mutationMode"`
	Tombstone    bool               `json:"tombstone"`
	// Fields maps readable authored field ids to their wire names and types.
	Fields        []FieldEntry      `json:"fields"`
	Operations    []OperationEntry  `json:"operations"`
	ChangeRequest *ChangeCapability `json:"changeRequest,omitempty"`
}

// FieldEntry maps a field id to its apiName.
type FieldEntry struct {
	ID      string          `json:"id"`
	APIName string          `json:"apiName"`
	Type    model.FieldType `json:"type"`
}

// OperationEntry is one operation the caller's profile grants on an entity.
type OperationEntry struct {
	Operation             string   `json:"operation"`
	AccessProfile         string   `json:"accessProfile"`
	ReadableFields        []string `json:"readableFields"`
	WritableFields        []string `json:"writableFields,omitempty"`
	FilterableFields      []string `json:"filterableFields,omitempty"`
	SortableFields        []string `json:"sortableFields,omitempty"`
	AllowCount            bool     `json:"allowCount,omitempty"`
	ReadableRequestFields []string `json:"readableRequestFields"`
}

// ChangeCapability describes a request entity's change requests, filtered to
// what the caller may read. Field names are authored ids.
type ChangeCapability struct {
	PlannerKind string `json:"plannerKind"`
	// PossibleWriteCount counts every write a planner may produce, readable or not.
	PossibleWriteCount int               `json:"possibleWriteCount,omitempty"`
	ReviewMode         string            `json:"reviewMode"`
	Application        model.Application `json:"application"`
	Effects            []EffectEntry     `json:"effects,omitempty"`
	Writes             []WriteEntry      `json:"writes,omitempty"`
}

// EffectEntry is a declared effect as the caller may see it.
type EffectEntry struct {
	ID        string             `json:"id"`
	Operation string             `json:"operation"`
	Target    model.EffectTarget `json:"target"`
	Set       []*model.SetField  `json:"set,omitempty"`
	Clear     []string           `json:"clear,omitempty"`
}

// WriteEntry is a planner's declared write as the caller may see it.
type WriteEntry struct {
	ID        string             `json:"id"`
	Operation string             `json:"operation"`
	Target    model.EffectTarget `json:"target"`
	Fields    []string           `json:"fields"`
}

// operations listed in the registry document, in this order.
var listedOperations = []string{
	model.OpCreate, model.OpGet, model.OpList, model.OpPatch, model.OpTombstone, model.OpBatch,
	model.OpRevisions, model.OpSnapshot, model.OpSubmitRequest, model.OpReviseRequest,
	model.OpCancelRequest, model.OpApplyRequest,
}

// Registry builds the registry document for a caller (the credential and
// profile of caller; its operation and entity are ignored): every entity and
// operation the decider grants, with the fields the grant lets it read. A
// presented and rejected token is refused as such.
func Registry(ctx context.Context, p *model.Package, d access.Decider, caller access.Request) ([]byte, error) {
	doc := RegistryDocument{
		Registry:          RegistryIdentity{ID: p.Registry.ID, Version: p.Registry.Version, Language: p.Registry.Language, CanonicalBaseIRI: p.Registry.CanonicalBaseIRI},
		PackageRevision:   p.Revision,
		SchemaFingerprint: p.SchemaFingerprint,
		Entities:          []EntityEntry{},
	}
	readableBy := map[string]map[string]bool{} // entity id → readable field ids
	var entries []EntityEntry
	for _, e := range p.Entities {
		entry := EntityEntry{ID: e.ID, Route: e.Route, Dataset: e.Dataset, Schema: "/v1/schemas/" + e.ID, MutationMode: e.MutationMode, Tombstone: e.Tombstone, Fields: []FieldEntry{}}
		readable := map[string]bool{}
		for _, op := range listedOperations {
			req := caller
			req.Operation, req.Entity = op, e
			g, err := d.Decide(ctx, req)
			if err != nil {
				var pe *problem.Error
				if errors.As(err, &pe) && pe.Code == problem.AuthenticationRefused {
					return nil, err
				}
				continue
			}
			oe := OperationEntry{
				Operation:             op,
				AccessProfile:         g.Profile,
				ReadableFields:        inEntityOrder(e, g.Readable),
				WritableFields:        inEntityOrder(e, g.Writable),
				FilterableFields:      inEntityOrder(e, g.Filterable),
				SortableFields:        inEntityOrder(e, g.Sortable),
				AllowCount:            g.AllowCount,
				ReadableRequestFields: []string{},
			}
			if e.IsRequestEntity() && !g.Anonymous && g.Source != nil {
				oe.ReadableRequestFields = append(oe.ReadableRequestFields, g.Source.ReadableRequestFields...)
			}
			for id := range g.Readable.All() {
				readable[id] = true
			}
			entry.Operations = append(entry.Operations, oe)
		}
		if len(entry.Operations) == 0 {
			continue
		}
		for _, f := range e.Fields {
			if readable[f.ID] {
				entry.Fields = append(entry.Fields, FieldEntry{ID: f.ID, APIName: f.APIName, Type: f.Type})
			}
		}
		readableBy[e.ID] = readable
		entries = append(entries, entry)
	}
	for _, entry := range entries {
		if e := p.EntityByID(entry.ID); e.IsRequestEntity() {
			entry.ChangeRequest = capability(e.ChangeRequest, readableBy[e.ID], readableBy)
		}
		doc.Entities = append(doc.Entities, entry)
	}
	b, err := json.Marshal(doc)
	if err != nil {
		return nil, fmt.Errorf("metadata: render registry: %w", err)
	}
	return b, nil
}

// capability describes a change request, leaving out what the caller cannot
// read: effects and writes on entities it cannot read, unreadable target
// fields, and values drawn from unreadable request fields. PossibleWriteCount
// still counts every write.
func capability(cr *model.ChangeRequest, request map[string]bool, readableBy map[string]map[string]bool) *ChangeCapability {
	c := &ChangeCapability{PlannerKind: cr.PlannerKind(), ReviewMode: cr.Review.Mode, Application: cr.Application}
	visible := func(t model.EffectTarget) bool {
		return readableBy[t.Entity] != nil && (t.FromField == "" || request[t.FromField])
	}
	for _, ef := range cr.Effects {
		if !visible(ef.Target) {
			continue
		}
		target := readableBy[ef.Target.Entity]
		out := EffectEntry{ID: ef.ID, Operation: ef.Operation, Target: ef.Target}
		for _, s := range ef.Set {
			if !target[s.Field] || (s.FromField != "" && !request[s.FromField]) {
				continue
			}
			out.Set = append(out.Set, s)
		}
		for _, f := range ef.Clear {
			if target[f] {
				out.Clear = append(out.Clear, f)
			}
		}
		c.Effects = append(c.Effects, out)
	}
	if cr.Planner != nil {
		c.PossibleWriteCount = len(cr.Planner.Writes)
		for _, w := range cr.Planner.Writes {
			if !visible(w.Target) {
				continue
			}
			out := WriteEntry{ID: w.ID, Operation: w.Operation, Target: w.Target, Fields: []string{}}
			for _, f := range w.Fields {
				if readableBy[w.Target.Entity][f] {
					out.Fields = append(out.Fields, f)
				}
			}
			c.Writes = append(c.Writes, out)
		}
	}
	return c
}

// inEntityOrder lists the members of a field set in the entity's field order.
func inEntityOrder(e *model.Entity, set access.FieldSet) []string {
	out := []string{}
	for _, f := range e.Fields {
		if set.Has(f.ID) {
			out = append(out, f.ID)
		}
	}
	for _, s := range e.Attachments {
		if set.Has(s.ID) {
			out = append(out, s.ID)
		}
	}
	return out
}
