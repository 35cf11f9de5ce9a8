package metadata

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"

	"github.com/registrum/registrum/host/access"
	"github.com/registrum/registrum/host/problem"
	"github.com/registrum/registrum/model"
	"github.com/registrum/registrum/plugins"
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
	Fields     []FieldEntry     `json:"fields"`
	Operations []OperationEntry `json:"operations"`
	// Batch holds the compiled batch bounds, present when the caller may
	// batch: what an ingestion client plans its chunks with.
	Batch         *BatchBounds      `json:"batch,omitempty"`
	ChangeRequest *ChangeCapability `json:"changeRequest,omitempty"`
}

// BatchBounds are an entity's compiled batch bounds.
type BatchBounds struct {
	MaximumItems int   `json:"maximumItems"`
	MaximumBytes int64 `json:"maximumBytes"`
}

// FieldEntry maps a field id to its apiName.
type FieldEntry struct {
	ID      string          `json:"id"`
	APIName string          `json:"apiName"`
	Type    model.FieldType `json:"type"`
	// Attachment is set on an attachment slot (type "attachment"): its
	// requiredForSubmit, maximumBytes, contentTypes, classification and
	// verification policy.
	Attachment map[string]any `json:"x-registry-attachment,omitempty"`
}

// TypeAttachment is the type of a slot in an entity's field list.
const TypeAttachment model.FieldType = "attachment"

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
// what the caller may read: effects and writes on entities it cannot use,
// target fields it cannot read and values drawn from request fields it
// cannot read are left out. Field names are authored ids; Fields maps the
// ones named to their apiNames. It describes; it grants nothing.
type ChangeCapability struct {
	Planner     PlannerEntry     `json:"planner"`
	Review      ReviewEntry      `json:"review"`
	Application ApplicationEntry `json:"application"`
	Retention   model.Retention  `json:"retention"`
	// Effects are the declarative effects; empty (never absent) for a plugin planner.
	Effects []EffectEntry `json:"effects"`
	// Fields maps every field id the capability names to its apiName.
	Fields []CapabilityField `json:"fields"`
}

// PlannerABI is the contract a plugin planner speaks (plugins/contract:
// PlannerInput in, PlanResult out), the same for tengo and wasm.
const PlannerABI = "registrum.change-request-plan/v1"

// PlannerEntry is the planner of a change request: declarative (abi, limits
// and possibleWriteCount null, no writes) or a plugin (tengo or wasm).
type PlannerEntry struct {
	Kind   string         `json:"kind"`
	ABI    *string        `json:"abi"`
	Limits *PlannerLimits `json:"limits"`
	// PossibleWriteCount counts every declared write, readable or not.
	PossibleWriteCount *int         `json:"possibleWriteCount"`
	Writes             []WriteEntry `json:"writes"`
}

// PlannerLimits are the limits of the plugin runtime a planner runs under
// (plugins.Limits). MemoryPages applies to wasm, MaximumAllocations to tengo.
type PlannerLimits struct {
	WallTimeMilliseconds int64  `json:"wallTimeMilliseconds"`
	MemoryPages          uint32 `json:"memoryPages,omitempty"`
	MaximumInputBytes    int    `json:"maximumInputBytes"`
	MaximumOutputBytes   int    `json:"maximumOutputBytes"`
	MaximumAllocations   int64  `json:"maximumAllocations,omitempty"`
}

// runtimeLimits are the limits the host's plugin runtime runs planners
// under: the plugins defaults, since the host builds its runtime with none
// set (host.loadPlanners). A host given configurable limits passes them here.
func runtimeLimits() plugins.Limits {
	return plugins.Limits{
		MemoryPages:    plugins.DefaultMemoryPages,
		WallTime:       plugins.DefaultWallTime,
		MaxInputBytes:  plugins.DefaultMaxInputBytes,
		MaxOutputBytes: plugins.DefaultMaxOutputBytes,
		MaxAllocs:      plugins.DefaultMaxAllocs,
	}
}

// ReviewEntry is the review binding: mode none, or mode authority with the
// authority's logical id and the policy id.
type ReviewEntry struct {
	Mode      string `json:"mode"`
	Authority string `json:"authority,omitempty"`
	PolicyID  string `json:"policyId,omitempty"`
}

// ApplicationEntry is the application policy: manual or automatic (with its
// executor, null when manual), the allowed dispositions and the queue reasons.
type ApplicationEntry struct {
	Mode         string   `json:"mode"`
	Executor     *string  `json:"executor"`
	Dispositions []string `json:"dispositions"`
	QueueReasons []string `json:"queueReasons"`
}

// EffectEntry is a declared effect as the caller may see it.
type EffectEntry struct {
	ID        string             `json:"id"`
	Operation string             `json:"operation"`
	Target    model.EffectTarget `json:"target"`
	Set       []SetEntry         `json:"set"`
	Clear     []string           `json:"clear"`
}

// SetEntry is one field an effect sets and its value source: exactly one
// of FromField (a request field), FromEffect (an earlier create effect's
// record) and Value (a literal wire value).
type SetEntry struct {
	Field      string `json:"field"`
	FromField  string `json:"fromField,omitempty"`
	FromEffect string `json:"fromEffect,omitempty"`
	Value      any    `json:"value,omitempty"`
}

// WriteEntry is a planner's declared write as the caller may see it.
type WriteEntry struct {
	ID        string             `json:"id"`
	Operation string             `json:"operation"`
	Target    model.EffectTarget `json:"target"`
	Fields    []string           `json:"fields"`
}

// CapabilityField maps a field a capability names (of the request entity or
// a target entity) to its apiName.
type CapabilityField struct {
	Entity  string `json:"entity"`
	ID      string `json:"id"`
	APIName string `json:"apiName"`
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
			if op == model.OpBatch && e.Batch != nil {
				entry.Batch = &BatchBounds{MaximumItems: e.Batch.MaximumItems, MaximumBytes: e.Batch.MaximumBytes}
			}
		}
		if len(entry.Operations) == 0 {
			continue
		}
		for _, f := range e.Fields {
			if readable[f.ID] {
				entry.Fields = append(entry.Fields, FieldEntry{ID: f.ID, APIName: f.APIName, Type: f.Type})
			}
		}
		for _, s := range e.Attachments {
			if readable[s.ID] {
				ext := model.AttachmentExtension(s)
				if d := p.VerificationPolicyDigest(s); d != "" {
					ext["verification"].(map[string]any)["policyDigest"] = d
				}
				entry.Fields = append(entry.Fields, FieldEntry{ID: s.ID, APIName: s.ID, Type: TypeAttachment, Attachment: ext})
			}
		}
		readableBy[e.ID] = readable
		entries = append(entries, entry)
	}
	for _, entry := range entries {
		if e := p.EntityByID(entry.ID); e.IsRequestEntity() {
			entry.ChangeRequest = capability(p, e, runtimeLimits(), readableBy)
		}
		doc.Entities = append(doc.Entities, entry)
	}
	b, err := json.Marshal(doc)
	if err != nil {
		return nil, fmt.Errorf("metadata: render registry: %w", err)
	}
	return b, nil
}

// capability describes the change request of request entity e, leaving
// out what the caller cannot read: effects and writes on entities it may not
// use (absent from readableBy) or selected by a request field it cannot read,
// target fields it cannot read, and set values drawn from a request field it
// cannot read or from an effect left out. PossibleWriteCount still counts
// every write.
func capability(p *model.Package, e *model.Entity, limits plugins.Limits, readableBy map[string]map[string]bool) *ChangeCapability {
	cr := e.ChangeRequest
	request := readableBy[e.ID]
	c := &ChangeCapability{
		Planner: PlannerEntry{Kind: cr.PlannerKind(), Writes: []WriteEntry{}},
		Review:  ReviewEntry{Mode: cr.Review.Mode, Authority: cr.Review.Authority, PolicyID: cr.Review.PolicyID},
		Application: ApplicationEntry{
			Mode:         cr.Application.Mode,
			Dispositions: slices.Clone(cr.Application.AllowedDispositions()),
			QueueReasons: append([]string{}, cr.Application.QueueReasons...),
		},
		Retention: cr.Retention,
		Effects:   []EffectEntry{},
	}
	if cr.Application.Executor != "" {
		c.Application.Executor = &cr.Application.Executor
	}
	named := map[string]map[string]bool{} // entity id → field ids named
	name := func(entity, field string) {
		if named[entity] == nil {
			named[entity] = map[string]bool{}
		}
		named[entity][field] = true
	}
	visible := func(t model.EffectTarget, shown map[string]bool) bool {
		return readableBy[t.Entity] != nil && (t.FromField == "" || request[t.FromField]) &&
			(t.FromEffect == "" || shown[t.FromEffect])
	}
	shown := map[string]bool{} // effects listed
	for _, ef := range cr.Effects {
		if !visible(ef.Target, shown) {
			continue
		}
		shown[ef.ID] = true
		target := readableBy[ef.Target.Entity]
		if ef.Target.FromField != "" {
			name(e.ID, ef.Target.FromField)
		}
		out := EffectEntry{ID: ef.ID, Operation: ef.Operation, Target: ef.Target, Set: []SetEntry{}, Clear: []string{}}
		for _, s := range ef.Set {
			switch {
			case !target[s.Field]:
				continue
			case s.FromField != "" && !request[s.FromField]:
				continue
			case s.FromEffect != "" && !shown[s.FromEffect]:
				continue
			}
			name(ef.Target.Entity, s.Field)
			if s.FromField != "" {
				name(e.ID, s.FromField)
			}
			out.Set = append(out.Set, SetEntry{Field: s.Field, FromField: s.FromField, FromEffect: s.FromEffect, Value: s.Value})
		}
		for _, f := range ef.Clear {
			if target[f] {
				name(ef.Target.Entity, f)
				out.Clear = append(out.Clear, f)
			}
		}
		c.Effects = append(c.Effects, out)
	}
	if pl := cr.Planner; pl != nil {
		abi, count := PlannerABI, len(pl.Writes)
		c.Planner.ABI, c.Planner.PossibleWriteCount = &abi, &count
		c.Planner.Limits = plannerLimits(pl.Engine, limits)
		for _, w := range pl.Writes {
			if !visible(w.Target, nil) {
				continue
			}
			if w.Target.FromField != "" {
				name(e.ID, w.Target.FromField)
			}
			out := WriteEntry{ID: w.ID, Operation: w.Operation, Target: w.Target, Fields: []string{}}
			for _, f := range w.Fields {
				if readableBy[w.Target.Entity][f] {
					name(w.Target.Entity, f)
					out.Fields = append(out.Fields, f)
				}
			}
			c.Planner.Writes = append(c.Planner.Writes, out)
		}
	}
	c.Fields = []CapabilityField{}
	for _, ent := range p.Entities {
		for _, f := range ent.Fields {
			if named[ent.ID][f.ID] {
				c.Fields = append(c.Fields, CapabilityField{Entity: ent.ID, ID: f.ID, APIName: f.APIName})
			}
		}
	}
	return c
}

// plannerLimits are the runtime limits that bind a planner of the engine.
func plannerLimits(engine string, l plugins.Limits) *PlannerLimits {
	out := &PlannerLimits{
		WallTimeMilliseconds: l.WallTime.Milliseconds(),
		MaximumInputBytes:    l.MaxInputBytes,
		MaximumOutputBytes:   l.MaxOutputBytes,
	}
	switch model.Engine(engine) {
	case model.EngineWASM:
		out.MemoryPages = l.MemoryPages
	case model.EngineTengo:
		out.MaximumAllocations = l.MaxAllocs
	}
	return out
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
