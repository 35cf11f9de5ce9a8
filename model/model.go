// Package model holds the compiled registry package: the resolved, immutable
// description of a registry that the record host serves from. The compiler in
// project produces it from an author's project; the host, the store and
// the generators read it. It has no behaviour beyond lookups, loading and the
// content digest that identifies it, besides the facts the compiler and the
// host share about a package: the paths of its generated artifacts, the URN
// of an event's schema and the table of the capabilities the host serves.
package model

import (
	"encoding/json"
	"fmt"
)

// Format identifies the version of the package document layout.
const Format = "registrum.package/v1"

// FileName is the name of the package document inside a package folder.
const FileName = "package.json"

// Package is a compiled registry package. Its Revision is the sha256 digest of
// the canonical (RFC 8785) form of the document with Revision left empty; the
// document lists the digest of every source, module and generated file, so the
// revision covers them too.
type Package struct {
	Format            string    `json:"format"`
	Revision          string    `json:"revision,omitempty"`
	SchemaFingerprint string    `json:"schemaFingerprint"`
	Registry          Registry  `json:"registry"`
	Entities          []*Entity `json:"entities"`
	// Modules are the reviewed plugin modules the package uses, pinned by digest.
	Modules []Module `json:"modules,omitempty"`
	// Files lists every source and generated file of the package with its digest.
	Files []File `json:"files,omitempty"`
	// Production is true when the package was compiled with the production
	// rules (a handler for every hook, a pinned digest for every module).
	Production bool `json:"production,omitempty"`
	// Vocabularies are the closed code lists fields draw from.
	Vocabularies []*Vocabulary `json:"vocabularies,omitempty"`
	// Profiles are the access profiles.
	Profiles []*Profile `json:"profiles,omitempty"`
	// Actions are the immediate actions.
	Actions []*Action `json:"actions,omitempty"`
	// Forms are the published form definitions.
	Forms []*Form `json:"forms,omitempty"`
	// Verifiers are the attachment verifiers the package uses.
	Verifiers []Verifier `json:"verifiers,omitempty"`
}

// Vocabulary is a named closed list of codes.
type Vocabulary struct {
	ID     string   `json:"id"`
	Values []string `json:"values"`
}

// Registry is the identity of the registry and the published URL bases the
// specification leaves as placeholders.
type Registry struct {
	ID               string `json:"id"`
	Version          string `json:"version"`
	Language         string `json:"language"`
	CanonicalBaseIRI string `json:"canonicalBaseIri"`
	URLs             URLs   `json:"urls"`
}

// URLs are the metadata URL bases of a registry.
type URLs struct {
	// Profile is {profile_url}: the record envelope profile, linked with rel="profile".
	Profile string `json:"profile"`
	// Context is {context_url}: the JSON-LD context of the envelope.
	Context string `json:"context"`
	// ProblemTypeBase is {problem_type_base}: problem document types are this
	// base, "/", then the code with dots read as path segments.
	ProblemTypeBase string `json:"problemTypeBase"`
	// MetadataBase is {metadata_base}: where schemas and forms are published.
	MetadataBase string `json:"metadataBase"`
	// ConceptBase is the base of concept addresses used by forms.
	ConceptBase string `json:"conceptBase"`
}

// MutationMode says which writes an entity accepts after create.
type MutationMode string

// Mutation modes.
const (
	Mutable    MutationMode = "mutable"
	CreateOnly MutationMode = "create-only"
)

// Entity is one kind of record the registry serves.
type Entity struct {
	ID             string       `json:"id"`
	Route          string       `json:"route"`
	Dataset        string       `json:"dataset"`
	Classification string       `json:"classification,omitempty"`
	MutationMode   MutationMode `json:"mutationMode"`
	Tombstone      bool         `json:"tombstone,omitempty"`
	// MaximumBodyBytes bounds the request body of a single-record write.
	MaximumBodyBytes int64    `json:"maximumBodyBytes"`
	Batch            *Batch   `json:"batch,omitempty"`
	Fields           []*Field `json:"fields"`
	// Temporal makes the entity temporal: records have a validity interval.
	Temporal *Temporal `json:"temporal,omitempty"`
	// GeoJSON enables the spatial adapter on a crs84-point field.
	GeoJSON *GeoJSON `json:"geojson,omitempty"`
	// Constraints are enforced by the store (unique, reference, temporal
	// non-overlap, value checks).
	Constraints []*Constraint `json:"constraints,omitempty"`
	// Indexes are additional btree indexes.
	Indexes []*Index `json:"indexes,omitempty"`
	// Cursor bounds the lifetime of collection cursors.
	Cursor Cursor `json:"cursor"`
	// Attachments are the file slots of a request entity (at most 8).
	Attachments []*AttachmentSlot `json:"attachments,omitempty"`
	// ChangeRequest, when set, makes the entity a request entity.
	ChangeRequest *ChangeRequest `json:"changeRequest,omitempty"`
	// Hooks are the events declared on the entity.
	Hooks []*Hook `json:"hooks,omitempty"`
}

// IsRequestEntity reports whether the entity's records are change requests.
func (e *Entity) IsRequestEntity() bool { return e.ChangeRequest != nil }

// Temporal names the interval fields of a temporal entity: both of Type
// (date or timestamp); start required, end nullable (open), start inclusive,
// end exclusive.
type Temporal struct {
	StartField string    `json:"startField"`
	EndField   string    `json:"endField"`
	Type       FieldType `json:"type"`
}

// GeoJSON names the crs84-point field served by the spatial adapter.
type GeoJSON struct {
	GeometryField string `json:"geometryField"`
}

// Constraint kinds.
const (
	ConstraintUnique             = "unique"
	ConstraintReference          = "reference"
	ConstraintTemporalNonOverlap = "temporal-non-overlap"
	ConstraintCheck              = "check"
)

// Check operators.
const (
	CheckEq = "eq"
	CheckNe = "ne"
	CheckLt = "lt"
	CheckLe = "le"
	CheckGt = "gt"
	CheckGe = "ge"
)

// Constraint is a rule the store enforces on every write. Field names are
// authored ids.
//
//   - unique: Fields together are unique among live records.
//   - reference: Field (a reference field) names an existing Target record.
//   - temporal-non-overlap: records with equal ScopeFields have disjoint
//     validity intervals (the entity's Temporal fields).
//   - check: Field Operator (Value, or OtherField of the same type) holds
//     whenever Field is not null.
type Constraint struct {
	ID          string   `json:"id"`
	Kind        string   `json:"kind"`
	Fields      []string `json:"fields,omitempty"`
	Field       string   `json:"field,omitempty"`
	Target      string   `json:"target,omitempty"`
	ScopeFields []string `json:"scopeFields,omitempty"`
	Operator    string   `json:"operator,omitempty"`
	Value       any      `json:"value,omitempty"`
	OtherField  string   `json:"otherField,omitempty"`
}

// Index is an additional btree index over fields (authored ids).
type Index struct {
	ID     string   `json:"id"`
	Fields []string `json:"fields"`
}

// Cursor holds the collection cursor settings of an entity.
type Cursor struct {
	MaxAgeSeconds int `json:"maxAgeSeconds"`
}

// Batch holds the bounds of an entity's batch route; a nil Batch means the
// entity has no batch route.
type Batch struct {
	MaximumItems int   `json:"maximumItems"`
	MaximumBytes int64 `json:"maximumBytes"`
}

// FieldType is the type of a field, which fixes its wire encoding and storage.
type FieldType string

// Field types.
const (
	TypeString     FieldType = "string"
	TypeText       FieldType = "text"
	TypeInteger    FieldType = "integer"
	TypeDecimal    FieldType = "decimal"
	TypeBoolean    FieldType = "boolean"
	TypeDate       FieldType = "date"
	TypeTimestamp  FieldType = "timestamp"
	TypeUUID       FieldType = "uuid"
	TypeCode       FieldType = "code"
	TypeReference  FieldType = "reference"
	TypeCRS84Point FieldType = "crs84-point"
	TypeStructured FieldType = "structured"
)

// Field is one field of an entity. ID is the authored identifier (used in
// grants, conditions and projections); APIName is its name on the proto.
type Field struct {
	ID             string    `json:"id"`
	APIName        string    `json:"apiName"`
	Type           FieldType `json:"type"`
	Required       bool      `json:"required,omitempty"`
	Classification string    `json:"classification,omitempty"`
	// Description is the author's description of the field, for schemas and docs.
	Description string `json:"description,omitempty"`
	// String and text bounds, counted in Unicode characters.
	MinLength *int   `json:"minLength,omitempty"`
	MaxLength *int   `json:"maxLength,omitempty"`
	Pattern   string `json:"pattern,omitempty"`
	// Integer bounds.
	Minimum *int64 `json:"minimum,omitempty"`
	Maximum *int64 `json:"maximum,omitempty"`
	// Decimal precision and scale.
	Precision *int `json:"precision,omitempty"`
	Scale     *int `json:"scale,omitempty"`
	// Vocabulary names the vocabulary a code field draws from, when it
	// draws from a named one; Values always holds the resolved codes.
	Vocabulary string `json:"vocabulary,omitempty"`
	// Values is the closed vocabulary of a code field.
	Values []string `json:"values,omitempty"`
	// Target is the entity id a reference field points at.
	Target string `json:"target,omitempty"`
	// Schema is the inline JSON Schema of a structured field.
	Schema json.RawMessage `json:"schema,omitempty"`
}

// File is a source or generated file that belongs to the package.
type File struct {
	// Path is relative to the package folder, with forward slashes.
	Path   string `json:"path"`
	Role   string `json:"role"` // for example "source", "entity-schema", "openapi", "event-schema", "form-schema"
	SHA256 string `json:"sha256"`
}

// EntityByID returns the entity with the given id, or nil.
func (p *Package) EntityByID(id string) *Entity {
	for _, e := range p.Entities {
		if e.ID == id {
			return e
		}
	}
	return nil
}

// EntityByRoute returns the entity served at the given route, or nil.
func (p *Package) EntityByRoute(route string) *Entity {
	for _, e := range p.Entities {
		if e.Route == route {
			return e
		}
	}
	return nil
}

// Field returns the field with the given authored id, or nil.
func (e *Entity) Field(id string) *Field {
	for _, f := range e.Fields {
		if f.ID == id {
			return f
		}
	}
	return nil
}

// FieldByAPIName returns the field with the given wire name, or nil.
func (e *Entity) FieldByAPIName(name string) *Field {
	for _, f := range e.Fields {
		if f.APIName == name {
			return f
		}
	}
	return nil
}

// Nullable reports whether the field accepts null: optional fields are nullable.
func (f *Field) Nullable() bool { return !f.Required }

// String implements fmt.Stringer for diagnostics.
func (f *Field) String() string { return fmt.Sprintf("%s (%s)", f.ID, f.Type) }
