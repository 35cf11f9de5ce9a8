package model

import "slices"

// Operations an entity grant can allow.
const (
	OpCreate        = "create"
	OpGet           = "get"
	OpList          = "list"
	OpPatch         = "patch"
	OpTombstone     = "tombstone"
	OpBatch         = "batch"
	OpRevisions     = "revisions"
	OpSnapshot      = "snapshot"
	OpSubmitRequest = "submit_request"
	OpReviseRequest = "revise_request"
	OpCancelRequest = "cancel_request"
	OpApplyRequest  = "apply_request"
	// OpInvoke is the one operation of an action grant.
	OpInvoke = "invoke"
)

// Readable request fields a grant may disclose on change request records.
const (
	RequestFieldReviewState    = "review_state"
	RequestFieldActorReference = "actor_reference"
)

// Profile is an access profile: the conditions a token must meet and what the
// profile then grants. A request selects exactly one profile; profiles are
// never merged.
type Profile struct {
	ID string `json:"id"`
	// Default makes the profile the default of every route it grants; each
	// route has at most one default profile.
	Default bool `json:"default,omitempty"`
	// Anonymous profiles admit requests without a bearer token and have no principal.
	Anonymous bool `json:"anonymous,omitempty"`
	// RequiredScopes must all be present in the token's scope claim.
	RequiredScopes []string `json:"requiredScopes,omitempty"`
	// RequiredPurposes: when nonempty, the token's purpose must be one of them.
	RequiredPurposes []string `json:"requiredPurposes,omitempty"`
	// PrincipalClaim names the token claim that identifies the caller.
	PrincipalClaim string         `json:"principalClaim,omitempty"`
	Grants         []*Grant       `json:"grants,omitempty"`
	ActionGrants   []*ActionGrant `json:"actionGrants,omitempty"`
}

// Grant is what a profile allows on one entity. Field lists hold authored
// field ids (attachment slot ids included), never apiNames.
type Grant struct {
	Entity           string   `json:"entity"`
	Operations       []string `json:"operations"`
	ReadableFields   []string `json:"readableFields,omitempty"`
	WritableFields   []string `json:"writableFields,omitempty"`
	FilterableFields []string `json:"filterableFields,omitempty"`
	SortableFields   []string `json:"sortableFields,omitempty"`
	AllowCount       bool     `json:"allowCount,omitempty"`
	// RowBoundaries hide records outside them on reads and writes.
	RowBoundaries RowBoundaries `json:"rowBoundaries"`
	// RequestVisibility "owner" limits request reads to the caller's own requests.
	RequestVisibility string `json:"requestVisibility,omitempty"`
	// RequestPresence adds data.requestPresence on reads of this (target) entity.
	RequestPresence []*RequestPresence `json:"requestPresence,omitempty"`
	// ReadableRequestFields ⊆ {review_state, actor_reference}.
	ReadableRequestFields []string `json:"readableRequestFields,omitempty"`
	// ProvenanceFields ⊆ {kind, reasonCode, reasonText, sourceReferences}: the
	// correction context shown on revisions.
	ProvenanceFields []string `json:"provenanceFields,omitempty"`
	// ApplyTargets are the entities an applier may write through apply_request.
	ApplyTargets []*Target `json:"applyTargets,omitempty"`
}

// Allows reports whether the grant includes the operation.
func (g *Grant) Allows(op string) bool { return slices.Contains(g.Operations, op) }

// CanRead reports whether the grant lists the field id as readable.
func (g *Grant) CanRead(fieldID string) bool { return slices.Contains(g.ReadableFields, fieldID) }

// CanWrite reports whether the grant lists the field id as writable.
func (g *Grant) CanWrite(fieldID string) bool { return slices.Contains(g.WritableFields, fieldID) }

// RowBoundaries is either Unrestricted or a nonempty list of rules that must all hold.
type RowBoundaries struct {
	Unrestricted bool       `json:"unrestricted,omitempty"`
	Rules        []*RowRule `json:"rules,omitempty"`
}

// Row boundary operators.
const (
	// BoundaryEquals: the record field equals the claim value.
	BoundaryEquals = "equals"
	// BoundaryIn: the record field is one of the members of the claim (a JSON array).
	BoundaryIn = "in"
)

// RowRule compares a record field (authored id) with a token claim.
type RowRule struct {
	Field    string `json:"field"`
	Claim    string `json:"claim"`
	Operator string `json:"operator"`
}

// RequestPresence declares that reads of a target entity carry the pending
// change requests of RequestEntity that target the record.
type RequestPresence struct {
	RequestEntity string        `json:"requestEntity"`
	RowBoundaries RowBoundaries `json:"rowBoundaries"`
}

// Target is an entity that an action or an apply may reach, with the row
// boundaries that apply to every record reached.
type Target struct {
	Entity        string        `json:"entity"`
	RowBoundaries RowBoundaries `json:"rowBoundaries"`
}

// ActionGrant allows invoking an immediate action.
type ActionGrant struct {
	Action     string    `json:"action"`
	Operations []string  `json:"operations"`
	Targets    []*Target `json:"targets"`
}

// ProfileByID returns the profile with the given id, or nil.
func (p *Package) ProfileByID(id string) *Profile {
	for _, pr := range p.Profiles {
		if pr.ID == id {
			return pr
		}
	}
	return nil
}

// Grant returns the profile's grant on the entity, or nil.
func (pr *Profile) Grant(entityID string) *Grant {
	for _, g := range pr.Grants {
		if g.Entity == entityID {
			return g
		}
	}
	return nil
}

// ActionGrant returns the profile's grant on the action, or nil.
func (pr *Profile) ActionGrant(actionID string) *ActionGrant {
	for _, g := range pr.ActionGrants {
		if g.Action == actionID {
			return g
		}
	}
	return nil
}

// DefaultProfile returns the default profile of the entity's route, or nil
// when the route has none.
func (p *Package) DefaultProfile(entityID string) *Profile {
	for _, pr := range p.Profiles {
		if pr.Default && pr.Grant(entityID) != nil {
			return pr
		}
	}
	return nil
}
