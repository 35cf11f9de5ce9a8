// Package planners turns a change request into the writes it will apply.
//
// Every request entity has one planner: declarative (the `effects` the
// project declares, evaluated by the host itself) or a reviewed plugin module
// (tengo or wasm, called through package plugins with its pinned digest).
// Whatever the kind, a plan is checked against the writes the project
// declares (targets, operations, fields, value types; references only through
// fromField or fromEffect), computed once when the request is submitted, and
// frozen with the module digest and its effect digest. It is never computed
// again: apply writes the frozen plan.
//
// The package imports model and plugins only: it never touches the database
// or HTTP. The change-request service in package host calls it inside a
// submit and stores what it returns.
package planners

import (
	"context"

	"github.com/registrum/registrum/model"
)

// Input is what a planner is given: the request record as submitted.
type Input struct {
	// Entity is the request entity; its ChangeRequest says which planner.
	Entity *model.Entity
	// RequestID is the request record's id; ProposalVersion the proposal
	// being submitted.
	RequestID       string
	ProposalVersion int64
	// Fields are the request record's fields by authored id, in wire form.
	Fields map[string]any
}

// Write is one write of a plan, in the order it is applied.
type Write struct {
	// ID names the declared effect or write this one realises.
	ID string
	// Operation is model.EffectCreate or model.EffectPatch.
	Operation string
	// Target selects the target record: its entity, and for a patch the
	// reference field or earlier effect that names the record.
	Target model.EffectTarget
	// Set holds the fields written, by authored id, in wire form.
	Set map[string]any
	// Clear lists the fields set to null.
	Clear []string
}

// Plan is a frozen plan: its writes, the digest of the module that computed
// it (empty for a declarative planner) and the effect digest that binds the
// review and the apply to exactly these writes.
type Plan struct {
	Writes       []Write
	ModuleDigest string
	EffectDigest string
}

// A Planner computes the plan of a request entity's requests.
type Planner interface {
	// Kind returns the planner kind clients see in GET /v1/registry:
	// "declarative", "tengo" or "wasm".
	Kind() string
	// Plan computes and checks the plan of one submission. It returns a
	// *Refusal when the planner yields no plan or exceeds a ceiling, and an
	// error wrapping context.DeadlineExceeded when it ran out of time.
	Plan(ctx context.Context, in Input) (*Plan, error)
}

// Refusal is a planner's refusal to plan. Its Kind is the only detail a
// client is told (as request.plan_refused); Cause stays in the operator's log.
type Refusal struct {
	Kind  string
	Cause error
}

// Error returns the kind of refusal.
func (r *Refusal) Error() string { return "planner refused: " + r.Kind }

// Unwrap returns the cause.
func (r *Refusal) Unwrap() error { return r.Cause }
