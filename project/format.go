package project

import (
	"encoding/json"
	"fmt"
)

// FormatVersion is the value of the project document's format member.
const FormatVersion = "registrum.project/v1"

// The types below are the authoring format, as written by registry authors in
// registry.yaml (or registry.json). They are decoded strictly: every member
// is listed here, and the JSON Schema of the format
// (docs/schemas/project.schema.json) is generated from them, so the struct
// tags are the single source of the format. Tag schema holds the
// constraints the schema states (required, enum, bounds); tag doc holds the
// description editors show.

// Project is the whole authored project document.
type Project struct {
	Schema       string        `json:"$schema,omitempty" doc:"Optional: the JSON Schema of this format, for editors; ignored by the compiler."`
	Format       string        `json:"format" schema:"required,const=registrum.project/v1" doc:"Format of this document; always registrum.project/v1."`
	Registry     RegistrySpec  `json:"registry" schema:"required" doc:"Identity of the registry and its published URL bases."`
	Vocabularies []*Vocabulary `json:"vocabularies,omitempty" doc:"Named closed code lists that code fields draw from."`
	Verifiers    []*Verifier   `json:"verifiers,omitempty" doc:"Attachment verifiers: go-plugin binaries shipped in the package, or HTTP services."`
	Entities     []*EntitySpec `json:"entities" schema:"required,minItems=1" doc:"The kinds of record the registry serves."`
	Profiles     []*Profile    `json:"profiles,omitempty" doc:"Access profiles: token conditions and what they grant."`
	Actions      []*Action     `json:"actions,omitempty" doc:"Immediate actions: declared effects applied in one call."`
	Forms        []*Form       `json:"forms,omitempty" doc:"Published form definitions (JSON Schema 2020-12)."`
}

// RegistrySpec is the registry's identity and URL bases.
type RegistrySpec struct {
	ID               string  `json:"id" schema:"required,ident" doc:"Registry identifier, used in URNs and metadata."`
	Version          string  `json:"version" schema:"required,minLength=1,maxLength=64" doc:"Version of the registry definition."`
	Language         string  `json:"language" schema:"required,pattern=^[a-z]{2,3}(-[A-Za-z0-9]{2,8})*$" doc:"Default language, a BCP 47 tag such as en or fr-BE."`
	CanonicalBaseIRI string  `json:"canonicalBaseIri" schema:"required,format=uri" doc:"Absolute http(s) base IRI of the registry; URL bases default under it."`
	URLs             URLSpec `json:"urls,omitzero" doc:"Published URL bases; each defaults under canonicalBaseIri."`
}

// URLSpec are the URL bases the specification leaves as placeholders.
type URLSpec struct {
	Profile         string `json:"profile,omitempty" schema:"format=uri" doc:"{profile_url}: record envelope profile. Default {canonicalBaseIri}/profiles/record/v1."`
	Context         string `json:"context,omitempty" schema:"format=uri" doc:"{context_url}: JSON-LD context. Default {canonicalBaseIri}/contexts/record/v1.jsonld."`
	ProblemTypeBase string `json:"problemTypeBase,omitempty" schema:"format=uri" doc:"{problem_type_base}. Default {canonicalBaseIri}/problems."`
	MetadataBase    string `json:"metadataBase,omitempty" schema:"format=uri" doc:"{metadata_base}: where schemas and forms are published. Default {canonicalBaseIri}/metadata."`
	ConceptBase     string `json:"conceptBase,omitempty" schema:"format=uri" doc:"{concept_base}: base of form concept addresses. Default {canonicalBaseIri}/concepts."`
}

// Vocabulary is a named closed code list.
type Vocabulary struct {
	ID     string   `json:"id" schema:"required,ident" doc:"Vocabulary identifier."`
	Values []string `json:"values" schema:"required,minItems=1" doc:"The codes, unique, each 1 to 256 characters."`
}

// Verifier is an attachment verifier.
type Verifier struct {
	ID                  string `json:"id" schema:"required,pattern=^[a-z][a-z0-9-]{0,63}$" doc:"Verifier identifier (lowercase letters, digits, '-'), named by attachments[].verification.verifier."`
	Kind                string `json:"kind" schema:"required,enum=go-plugin|http" doc:"go-plugin: a reviewed binary shipped in the package; http: a verification service."`
	Path                string `json:"path,omitempty" doc:"go-plugin: path of the binary, relative to the project folder."`
	SHA256              string `json:"sha256,omitempty" schema:"digest" doc:"go-plugin: pinned digest sha256:<64 hex> of the binary (required in production)."`
	Endpoint            string `json:"endpoint,omitempty" schema:"format=uri" doc:"http: the service URL, https (plain http only to a loopback address)."`
	AuthorizationRef    string `json:"authorizationRef,omitempty" schema:"pattern=^secret:file/[A-Za-z0-9][A-Za-z0-9._-]{0,127}$" doc:"http: secret:file/<name> reference to the bearer credential."`
	TimeoutMilliseconds int    `json:"timeoutMilliseconds,omitempty" schema:"minimum=100,maximum=60000" doc:"Bound of one call in milliseconds, 100 to 60000; default the host's."`
	MaximumBytes        int64  `json:"maximumBytes,omitempty" schema:"minimum=1,maximum=16777216" doc:"Bound of the content sent to the verifier, 1 to 16777216 bytes."`
}

// EntitySpec is one entity.
type EntitySpec struct {
	ID               string            `json:"id" schema:"required,ident" doc:"Entity identifier (also meta.entityTypeIdentifier)."`
	Route            string            `json:"route" schema:"required,ident" doc:"Route segment: /v1/records/{route}."`
	Dataset          string            `json:"dataset" schema:"required,ident" doc:"Dataset identifier (meta.datasetIdentifier)."`
	Classification   string            `json:"classification,omitempty" schema:"enum=public|internal|restricted" doc:"Informational classification; default internal. Fields inherit it."`
	MutationMode     string            `json:"mutationMode,omitempty" schema:"enum=mutable|create-only" doc:"mutable (default) or create-only (no patch, no tombstone)."`
	Tombstone        bool              `json:"tombstone,omitempty" doc:"Enables DELETE (tombstone) on the route."`
	MaximumBodyBytes int64             `json:"maximumBodyBytes,omitempty" schema:"minimum=1,maximum=16777216" doc:"Bound of a single-record write body; default 1048576."`
	Batch            *Batch            `json:"batch,omitempty" doc:"Enables the batch route with these bounds."`
	Temporal         *Temporal         `json:"temporal,omitempty" doc:"Makes the entity temporal (validity interval)."`
	GeoJSON          *GeoJSON          `json:"geojson,omitempty" doc:"Serves the entity on the spatial adapter."`
	Cursor           *Cursor           `json:"cursor,omitempty" doc:"Collection cursor settings."`
	Fields           []*FieldSpec      `json:"fields" schema:"required,minItems=1" doc:"The entity's fields."`
	Constraints      []*Constraint     `json:"constraints,omitempty" doc:"Rules the store enforces on every write."`
	Indexes          []*Index          `json:"indexes,omitempty" doc:"Additional btree indexes."`
	Attachments      []*AttachmentSlot `json:"attachments,omitempty" schema:"maxItems=8" doc:"File slots; request entities only; at most 8."`
	ChangeRequest    *ChangeRequest    `json:"changeRequest,omitempty" doc:"Makes this a request entity."`
	Hooks            []*Hook           `json:"hooks,omitempty" doc:"Events declared on the entity."`
}

// Batch holds batch route bounds.
type Batch struct {
	MaximumItems int   `json:"maximumItems" schema:"required,minimum=1,maximum=1000" doc:"Items per batch, 1 to 1000."`
	MaximumBytes int64 `json:"maximumBytes" schema:"required,minimum=1,maximum=16777216" doc:"Bytes per batch body, 1 to 16777216."`
}

// Temporal names the interval fields.
type Temporal struct {
	StartField string `json:"startField" schema:"required,ident" doc:"Required date or timestamp field: start, inclusive."`
	EndField   string `json:"endField" schema:"required,ident" doc:"Optional field of the same type: end, exclusive; null is open."`
}

// GeoJSON names the geometry field.
type GeoJSON struct {
	GeometryField string `json:"geometryField" schema:"required,ident" doc:"A crs84-point field."`
}

// Cursor holds cursor settings.
type Cursor struct {
	MaxAgeSeconds int `json:"maxAgeSeconds" schema:"required,minimum=1,maximum=604800" doc:"Cursor lifetime in seconds (default 3600)."`
}

// FieldSpec is one field (also used for action inputs).
type FieldSpec struct {
	ID             string         `json:"id" schema:"required,ident" doc:"Authored identifier: used in grants, constraints, conditions and projections."`
	APIName        string         `json:"apiName,omitempty" schema:"pattern=^[A-Za-z][A-Za-z0-9_]{0,63}$" doc:"Wire name in domainData; default: the id in camelCase."`
	Type           string         `json:"type" schema:"required,enum=string|text|integer|decimal|boolean|date|timestamp|uuid|code|reference|crs84-point|structured" doc:"Field type; it fixes the wire encoding."`
	Required       bool           `json:"required,omitempty" doc:"Required on create; optional fields are nullable."`
	Classification string         `json:"classification,omitempty" schema:"enum=public|internal|restricted" doc:"Default: the entity's classification."`
	Description    string         `json:"description,omitempty" doc:"Human description, published in schemas."`
	MinLength      *int           `json:"minLength,omitempty" schema:"minimum=0" doc:"string, text: minimum length in characters."`
	MaxLength      *int           `json:"maxLength,omitempty" schema:"minimum=1,maximum=10000000" doc:"string (required, at most 1000000), text (default 1000000): maximum length in characters."`
	Pattern        string         `json:"pattern,omitempty" doc:"string: a regular expression the whole value matches."`
	Minimum        *int64         `json:"minimum,omitempty" doc:"integer: inclusive lower bound."`
	Maximum        *int64         `json:"maximum,omitempty" doc:"integer: inclusive upper bound."`
	Precision      *int           `json:"precision,omitempty" schema:"minimum=1,maximum=38" doc:"decimal: total digits (required)."`
	Scale          *int           `json:"scale,omitempty" schema:"minimum=0,maximum=38" doc:"decimal: digits after the point (required); wire value is a string with exactly this many."`
	Vocabulary     string         `json:"vocabulary,omitempty" schema:"ident" doc:"code: the vocabulary the codes come from."`
	Values         []string       `json:"values,omitempty" doc:"code: inline codes, instead of vocabulary."`
	Target         string         `json:"target,omitempty" schema:"ident" doc:"reference: the target entity id."`
	Schema         map[string]any `json:"schema,omitempty" doc:"structured: inline JSON Schema (2020-12) of the value."`
}

// Constraint is an authored constraint.
type Constraint struct {
	ID          string   `json:"id,omitempty" schema:"ident" doc:"Stable identifier; default derived from kind and fields."`
	Kind        string   `json:"kind" schema:"required,enum=unique|reference|temporal-non-overlap|check" doc:"unique, reference, temporal-non-overlap or check."`
	Fields      []string `json:"fields,omitempty" doc:"unique: the fields that together are unique."`
	Field       string   `json:"field,omitempty" doc:"reference: the reference field; check: the field tested."`
	ScopeFields []string `json:"scopeFields,omitempty" doc:"temporal-non-overlap: records with equal values here may not overlap."`
	Operator    string   `json:"operator,omitempty" schema:"enum=eq|ne|lt|le|gt|ge" doc:"check: comparison operator."`
	Value       any      `json:"value,omitempty" doc:"check: literal wire value compared with."`
	OtherField  string   `json:"otherField,omitempty" doc:"check: a field of the same type compared with, instead of value."`
}

// Index is an authored index.
type Index struct {
	ID     string   `json:"id" schema:"required,ident" doc:"Index identifier."`
	Fields []string `json:"fields" schema:"required,minItems=1" doc:"Indexed fields, in order."`
}

// AttachmentSlot is an authored attachment slot.
type AttachmentSlot struct {
	ID             string        `json:"id" schema:"required,ident" doc:"Slot identifier; the slot appears in domainData under it."`
	Required       bool          `json:"required,omitempty" doc:"requiredForSubmit: submission needs it filled and verified."`
	MaximumBytes   int64         `json:"maximumBytes" schema:"required,minimum=1,maximum=16777216" doc:"1 to 16777216 bytes."`
	ContentTypes   []string      `json:"contentTypes" schema:"required,minItems=1" doc:"Lowercase concrete media types (no wildcard, no parameters)."`
	Classification string        `json:"classification,omitempty" schema:"enum=public|internal|restricted" doc:"Informational; default the entity's."`
	Verification   *Verification `json:"verification,omitempty" doc:"Quarantine uploads until a verifier approves them."`
}

// Verification binds a slot to a verifier.
type Verification struct {
	Verifier string `json:"verifier" schema:"required,ident" doc:"A verifiers[].id."`
	PolicyID string `json:"policyId" schema:"required,minLength=1,maxLength=128" doc:"Verification policy identifier."`
}

// ChangeRequest is an authored change request declaration.
type ChangeRequest struct {
	Effects     []*Effect    `json:"effects,omitempty" doc:"Declarative effects (instead of planner)."`
	Planner     *Planner     `json:"planner,omitempty" doc:"A reviewed module that plans the writes (instead of effects)."`
	Review      *Review      `json:"review" schema:"required" doc:"{authority, policyId} or {mode: none}."`
	Application *Application `json:"application,omitempty" doc:"How an approved request is applied; default manual."`
	Retention   *Retention   `json:"retention,omitempty" doc:"Proposal retention; default retain."`
}

// Effect is an authored effect.
type Effect struct {
	ID        string                `json:"id,omitempty" schema:"ident" doc:"Effect identifier; default effect-<n>."`
	Operation string                `json:"operation" schema:"required,enum=create|patch" doc:"create or patch."`
	Target    EffectTarget          `json:"target" schema:"required" doc:"The target entity and, for a patch, the record."`
	Set       map[string]*SetSource `json:"set,omitempty" doc:"Target field id → value source."`
	Clear     []string              `json:"clear,omitempty" doc:"Target fields set to null."`
}

// EffectTarget selects the target of an effect.
type EffectTarget struct {
	Entity     string `json:"entity,omitempty" schema:"ident" doc:"Target entity (required for create; implied by fromField's reference target)."`
	FromField  string `json:"fromField,omitempty" schema:"ident" doc:"A reference field (or action input) naming the target record."`
	FromEffect string `json:"fromEffect,omitempty" schema:"ident" doc:"An earlier create effect whose record is the target."`
}

// SetSource is where a set value comes from.
type SetSource struct {
	FromField  string `json:"fromField,omitempty" schema:"ident" doc:"A request field (or action input) of a compatible type."`
	FromEffect string `json:"fromEffect,omitempty" schema:"ident" doc:"An earlier create effect: its record id (into a reference field)."`
	Value      any    `json:"value,omitempty" doc:"A literal wire value."`
}

// Planner is an authored planner.
type Planner struct {
	Engine string          `json:"engine" schema:"required,enum=tengo|wasm" doc:"tengo script or wasm module."`
	Path   string          `json:"path" schema:"required,minLength=1" doc:"Module file, relative to the project folder."`
	SHA256 string          `json:"sha256,omitempty" schema:"digest" doc:"Pinned digest sha256:<64 hex> (required in production)."`
	Writes []*PlannedWrite `json:"writes" schema:"required,minItems=1" doc:"Every write the planner may produce."`
}

// PlannedWrite is one declared planner write.
type PlannedWrite struct {
	ID        string       `json:"id,omitempty" schema:"ident" doc:"Write identifier; default write-<n>."`
	Operation string       `json:"operation" schema:"required,enum=create|patch" doc:"create or patch."`
	Target    EffectTarget `json:"target" schema:"required" doc:"Target entity or reference field."`
	Fields    []string     `json:"fields" schema:"required,minItems=1" doc:"Target fields the write may set or clear."`
}

// Review is an authored review binding.
type Review struct {
	Mode      string   `json:"mode,omitempty" schema:"enum=none" doc:"none: no review (instead of authority and policyId)."`
	Authority string   `json:"authority,omitempty" schema:"ident" doc:"Logical id of the external review authority."`
	PolicyID  string   `json:"policyId,omitempty" schema:"minLength=1,maxLength=128" doc:"Review policy identifier."`
	Stages    []string `json:"stages,omitempty" schema:"ident" doc:"authority: the review stages the authority reports, in order; lifecycle hooks filter on them (when.stages)."`
}

// Application is the authored application mode.
type Application struct {
	Mode     string `json:"mode" schema:"required,enum=manual|automatic" doc:"manual (an authorized caller applies) or automatic."`
	Executor string `json:"executor,omitempty" schema:"ident" doc:"automatic: logical executor with its own credential."`
	// Dispositions and QueueReasons are the application policy clients see
	// in GET /v1/registry.
	Dispositions []string `json:"dispositions,omitempty" schema:"minItems=1,items=apply|queue" doc:"Allowed dispositions of an approved request: apply, queue; default [apply]."`
	QueueReasons []string `json:"queueReasons,omitempty" schema:"maxItems=16,ident" doc:"Reason codes a queue disposition may carry; required with queue, only with queue."`
}

// Retention is the authored retention mode.
type Retention struct {
	Mode string `json:"mode" schema:"required,enum=retain|operator-erase" doc:"retain or operator-erase."`
}

// Hook is an authored hook.
type Hook struct {
	ID         string   `json:"id" schema:"required,ident" doc:"Hook (event) identifier, unique across the registry."`
	Phase      string   `json:"phase" schema:"required" doc:"Always after."`
	Trigger    string   `json:"trigger" schema:"required,enum=created|patched|tombstoned|request_lifecycle" doc:"What fires the hook."`
	When       *When    `json:"when,omitempty" doc:"Narrows the trigger; omitted selects every matching trigger."`
	Projection []string `json:"projection" schema:"required" doc:"Captured fields (authored ids)."`
	Handler    *Handler `json:"handler,omitempty" doc:"url, tengo or wasm; required in production."`
	Retry      *Retry   `json:"retry,omitempty" doc:"The retry schedule of the hook's deliveries; omitted, the default (10 attempts over about a day)."`
}

// Retry is an authored retry schedule of a hook.
type Retry struct {
	MaximumAttempts int      `json:"maximumAttempts,omitempty" schema:"minimum=1,maximum=20" doc:"Attempts of one delivery generation, the first included (1 to 20); default: one more than the delays listed."`
	Delays          []string `json:"delays,omitempty" schema:"minItems=1" doc:"Pauses after each failed attempt, the last repeating: a number and ms, s, m or h (100ms to 24h), never shorter than the one before; default: the default schedule's."`
}

// When is an authored hook condition.
type When struct {
	Kind         string         `json:"kind" schema:"required,enum=fields|request_lifecycle" doc:"fields or request_lifecycle."`
	Changed      []string       `json:"changed,omitempty" doc:"fields: fields whose value changed (patched only)."`
	BeforeEquals map[string]any `json:"beforeEquals,omitempty" doc:"fields: field → value before the write (patched, tombstoned)."`
	AfterEquals  map[string]any `json:"afterEquals,omitempty" doc:"fields: field → value after the write (created, patched)."`
	Transitions  []string       `json:"transitions,omitempty" schema:"items=submit|revise|apply|cancel" doc:"request_lifecycle: transitions."`
	ToStates     []string       `json:"toStates,omitempty" schema:"items=draft|submitted|applied|cancelled" doc:"request_lifecycle: states entered."`
	Stages       []string       `json:"stages,omitempty" doc:"request_lifecycle: review stages."`
}

// Handler is an authored handler.
type Handler struct {
	Kind          string   `json:"kind" schema:"required,enum=url|tengo|wasm" doc:"url, tengo or wasm."`
	DestinationID string   `json:"destinationId,omitempty" schema:"ident" doc:"url: runtime eventDestinations key."`
	Script        string   `json:"script,omitempty" doc:"tengo: script path, relative to the project folder."`
	Module        string   `json:"module,omitempty" doc:"wasm: module path, relative to the project folder."`
	SHA256        string   `json:"sha256,omitempty" schema:"digest" doc:"Pinned digest of the script or module (required in production)."`
	Capabilities  []string `json:"capabilities,omitempty" schema:"items=clock|random" doc:"tengo, wasm: real sources the handler may use (clock, random); none by default."`
}

// Profile is an authored access profile.
type Profile struct {
	ID               string         `json:"id" schema:"required,ident" doc:"Profile identifier (the accessProfile query value)."`
	Default          bool           `json:"default,omitempty" doc:"Default profile of every route it grants (at most one per route)."`
	Anonymous        bool           `json:"anonymous,omitempty" doc:"Admits requests without a token; read operations only."`
	RequiredScopes   []string       `json:"requiredScopes,omitempty" doc:"Scopes the token must all carry (required unless anonymous)."`
	RequiredPurposes []string       `json:"requiredPurposes,omitempty" doc:"When set, the token's purpose must be one of these."`
	PrincipalClaim   string         `json:"principalClaim,omitempty" doc:"Claim naming the caller; default sub (none when anonymous)."`
	Grants           []*Grant       `json:"grants,omitempty" doc:"Per-entity grants."`
	ActionGrants     []*ActionGrant `json:"actionGrants,omitempty" doc:"Grants on immediate actions."`
}

// Grant is an authored entity grant.
type Grant struct {
	Entity                string             `json:"entity" schema:"required,ident" doc:"Entity id."`
	Operations            []string           `json:"operations" schema:"required,minItems=1,items=create|get|list|patch|tombstone|batch|revisions|snapshot|submit_request|revise_request|cancel_request|apply_request" doc:"Granted operations."`
	ReadableFields        []string           `json:"readableFields,omitempty" doc:"Field and slot ids the caller may read."`
	WritableFields        []string           `json:"writableFields,omitempty" doc:"Field and slot ids the caller may write."`
	FilterableFields      []string           `json:"filterableFields,omitempty" doc:"Fields usable in $filter."`
	SortableFields        []string           `json:"sortableFields,omitempty" doc:"Fields usable in $orderby."`
	AllowCount            bool               `json:"allowCount,omitempty" doc:"Allows $count."`
	RowBoundaries         *RowBoundaries     `json:"rowBoundaries" schema:"required" doc:"unrestricted, or rules comparing a field with a token claim."`
	RequestVisibility     string             `json:"requestVisibility,omitempty" schema:"enum=owner" doc:"owner: request reads limited to the caller's requests."`
	RequestPresence       []*RequestPresence `json:"requestPresence,omitempty" doc:"Adds pending requests of a request entity on reads."`
	ReadableRequestFields []string           `json:"readableRequestFields,omitempty" schema:"items=review_state|actor_reference" doc:"Request members disclosed (non-anonymous only)."`
	ProvenanceFields      []string           `json:"provenanceFields,omitempty" schema:"items=kind|reasonCode|reasonText|sourceReferences" doc:"Correction context shown on revisions."`
	ApplyTargets          []*Target          `json:"applyTargets,omitempty" doc:"Entities apply_request may write."`
}

// RowBoundaries is "unrestricted" or a nonempty list of rules.
type RowBoundaries struct {
	Unrestricted bool
	Rules        []*RowRule
}

// UnmarshalJSON reads "unrestricted" or a list of rules.
func (r *RowBoundaries) UnmarshalJSON(b []byte) error {
	var s string
	if err := json.Unmarshal(b, &s); err == nil {
		if s != "unrestricted" {
			return fmt.Errorf("row boundaries: %q is not unrestricted", s)
		}
		r.Unrestricted = true
		return nil
	}
	return json.Unmarshal(b, &r.Rules)
}

// MarshalJSON writes the authored form back.
func (r RowBoundaries) MarshalJSON() ([]byte, error) {
	if r.Unrestricted {
		return json.Marshal("unrestricted")
	}
	return json.Marshal(r.Rules)
}

// JSONSchema is the schema of row boundaries in the format's JSON Schema.
func (RowBoundaries) JSONSchema(ref func(any) map[string]any) map[string]any {
	return map[string]any{
		"description": "unrestricted, or a nonempty list of rules that must all hold.",
		"oneOf": []any{
			map[string]any{"const": "unrestricted"},
			map[string]any{"type": "array", "minItems": 1, "items": ref(RowRule{})},
		},
	}
}

// RowRule is an authored row boundary rule.
type RowRule struct {
	Field    string `json:"field" schema:"required,ident" doc:"Record field id."`
	Claim    string `json:"claim" schema:"required,minLength=1,maxLength=256" doc:"Token claim name."`
	Operator string `json:"operator,omitempty" schema:"enum=equals|in" doc:"equals (default) or in (claim is an array)."`
}

// RequestPresence is an authored request presence declaration.
type RequestPresence struct {
	RequestEntity string         `json:"requestEntity" schema:"required,ident" doc:"A request entity whose pending requests target this entity."`
	RowBoundaries *RowBoundaries `json:"rowBoundaries" schema:"required" doc:"Boundaries on the requests shown."`
}

// Target is an entity reached with row boundaries.
type Target struct {
	Entity        string         `json:"entity" schema:"required,ident" doc:"Entity id."`
	RowBoundaries *RowBoundaries `json:"rowBoundaries" schema:"required" doc:"Boundaries on every record reached."`
}

// ActionGrant is an authored action grant.
type ActionGrant struct {
	Action     string    `json:"action" schema:"required,ident" doc:"Action id."`
	Operations []string  `json:"operations" schema:"required,minItems=1,items=invoke" doc:"invoke."`
	Targets    []*Target `json:"targets" schema:"required,minItems=1" doc:"Every entity the action's effects reach, with boundaries."`
}

// Action is an authored immediate action.
type Action struct {
	ID            string          `json:"id" schema:"required,ident" doc:"Action identifier: POST /v1/actions/{id}."`
	Inputs        []*FieldSpec    `json:"inputs,omitempty" doc:"Typed inputs (field grammar)."`
	Effects       []*Effect       `json:"effects" schema:"required,minItems=1" doc:"Effects, applied in order in one transaction."`
	Preconditions []*Precondition `json:"preconditions,omitempty" doc:"Tests on target records before any write."`
	Handler       *ActionHandler  `json:"handler,omitempty" doc:"A reviewed module that computes values for the effects, or refuses."`
}

// ActionHandler is an authored action handler.
type ActionHandler struct {
	Engine       string          `json:"engine" schema:"required,enum=tengo|wasm" doc:"tengo script or wasm module."`
	Path         string          `json:"path" schema:"required,minLength=1" doc:"Module file, relative to the project folder."`
	SHA256       string          `json:"sha256,omitempty" schema:"digest" doc:"Pinned digest sha256:<64 hex> (required in production)."`
	Capabilities []string        `json:"capabilities,omitempty" schema:"items=clock|random" doc:"Real sources the handler may use (clock, random)."`
	Writes       []*HandlerWrite `json:"writes" schema:"required,minItems=1" doc:"For each effect it feeds: the target fields it may give values for."`
	Refusals     []string        `json:"refusals,omitempty" schema:"ident" doc:"Refusal codes the handler may answer with."`
}

// HandlerWrite is one effect an action handler feeds.
type HandlerWrite struct {
	Effect string   `json:"effect" schema:"required,ident" doc:"An effect of the action."`
	Fields []string `json:"fields" schema:"required,minItems=1" doc:"Target fields of that effect the handler may give values for."`
}

// Precondition is an authored precondition.
type Precondition struct {
	Effect      string `json:"effect" schema:"required,ident" doc:"A patch effect of the action."`
	Field       string `json:"field" schema:"required,ident" doc:"Field of the effect's target."`
	Equals      any    `json:"equals,omitempty" doc:"Literal value the field must have."`
	EqualsInput string `json:"equalsInput,omitempty" schema:"ident" doc:"Input whose value the field must have."`
}

// Form is an authored form definition.
type Form struct {
	ID          string       `json:"id" schema:"required,ident" doc:"Form identifier: {metadata_base}/forms/<id>/schema.json."`
	Title       string       `json:"title" schema:"required,minLength=1" doc:"Form title."`
	Description string       `json:"description" schema:"required,minLength=1" doc:"Form description."`
	Entity      string       `json:"entity,omitempty" schema:"ident" doc:"Request entity the form starts, if any."`
	Fields      []*FormField `json:"fields" schema:"required,minItems=1" doc:"Members of the form object."`
}

// FormField is an authored form field.
type FormField struct {
	Name                string     `json:"name" schema:"required,pattern=^[A-Za-z][A-Za-z0-9_]{0,63}$" doc:"JSON member name."`
	Type                string     `json:"type" schema:"required,enum=string|integer|number|boolean|array|object" doc:"JSON type."`
	Title               string     `json:"title,omitempty" doc:"Title."`
	Required            bool       `json:"required,omitempty" doc:"Listed in required."`
	Concept             string     `json:"concept,omitempty" doc:"Concept address: absolute, or relative to {concept_base}."`
	SupportsRequirement string     `json:"supportsRequirement,omitempty" doc:"Requirement identifier (x-supports-requirement)."`
	MinItems            *int       `json:"minItems,omitempty" schema:"minimum=0" doc:"Declared minItems."`
	MaxItems            *int       `json:"maxItems,omitempty" schema:"minimum=0" doc:"Declared maxItems."`
	Items               *FormItems `json:"items,omitempty" doc:"array: the item object."`
}

// FormItems is the authored item object of an array form field.
type FormItems struct {
	MinProperties *int         `json:"minProperties,omitempty" schema:"minimum=0" doc:"Declared minProperties."`
	Fields        []*FormField `json:"fields" schema:"required,minItems=1" doc:"Members of the item object."`
}
