// Package contract holds the documents a Registrum plugin module exchanges
// with the host: planner input and plan, hook-handler input and result,
// action-handler input and result, and the rules that make an output valid.
//
// It is shared by the host (package plugins) and by guests compiled to
// WebAssembly (package sdk/guest), so it depends on nothing but the standard
// library and Registrum's one JSON reader (internal/strictjson) and
// canonical writer (internal/canonjson), and builds for GOOS=wasip1
// GOARCH=wasm. Its JSON reading and writing (ParseValue, AppendValue and the
// AppendJSON methods) goes through those two and avoids reflection, which is
// slow inside a WebAssembly guest.
package contract

import "encoding/json"

// Operation is what an effect does to its target record.
type Operation string

// Effect operations.
const (
	// OperationCreate creates a new record of the target entity.
	OperationCreate Operation = "create"
	// OperationPatch changes fields of an existing record.
	OperationPatch Operation = "patch"
)

// PlannerInput is the planner's whole input: the draft request's declared
// fields keyed by authored field id. A field the submitter never supplied is
// absent; a field explicitly set to null is present with a nil value. Nothing
// else is given (no clock, caller or database), so a plan is a pure function
// of the request.
type PlannerInput struct {
	Request map[string]any `json:"request"`
}

// PlanResult is a planner's output: either a plan (one or more effects) or a
// refusal, never both.
type PlanResult struct {
	Effects []Effect `json:"effects,omitempty"`
	Refusal *Refusal `json:"refusal,omitempty"`
}

// Effect is one write of a plan.
type Effect struct {
	// ID names the effect so later effects can refer to the record it
	// creates (FieldSource.FromEffect, Target.FromEffect). Required.
	ID        string    `json:"id"`
	Operation Operation `json:"operation"`
	Target    Target    `json:"target"`
	// Set maps target field ids to the source of their new value.
	Set map[string]FieldSource `json:"set,omitempty"`
	// Clear lists target field ids set to null.
	Clear []string `json:"clear,omitempty"`
}

// Target selects the record an effect writes. Entity is always named; a
// create names nothing else; a patch names exactly one of FromField (a
// request field holding the record id) or FromEffect (an earlier create).
type Target struct {
	Entity     string `json:"entity"`
	FromField  string `json:"fromField,omitempty"`
	FromEffect string `json:"fromEffect,omitempty"`
}

// FieldSource is where a set field's value comes from: exactly one of a
// literal JSON Value (which may be null), a request field (FromField), or the
// id of the record an earlier create effect made (FromEffect).
type FieldSource struct {
	Value      json.RawMessage `json:"value,omitempty"`
	FromField  string          `json:"fromField,omitempty"`
	FromEffect string          `json:"fromEffect,omitempty"`
}

// Refusal is a module's declared "no": a short machine kind (for a planner) or
// code (for an action handler). It carries no free text, so nothing a module
// writes reaches a caller beyond a declared token.
type Refusal struct {
	Kind  string `json:"kind,omitempty"`
	Code  string `json:"code,omitempty"`
	Field string `json:"field,omitempty"`
}

// Write is one write a planner declares it may produce: an operation on an
// entity touching at most the listed fields. Every effect of its plans must
// fit one declared write.
type Write struct {
	Entity    string    `json:"entity"`
	Operation Operation `json:"operation"`
	Fields    []string  `json:"fields"`
}

// HookOutcome is a hook handler's answer.
type HookOutcome string

// Hook outcomes.
const (
	// HookAcknowledged means the event was handled; it is not run again.
	HookAcknowledged HookOutcome = "acknowledged"
	// HookRetry means the handler could not handle the event now; the worker
	// retries it later.
	HookRetry HookOutcome = "retry"
)

// HookResult is a hook handler's output. Kind names why a retry is wanted (a
// short token, no free text).
type HookResult struct {
	Outcome HookOutcome `json:"outcome"`
	Kind    string      `json:"kind,omitempty"`
}

// ActionInput is an action handler's input: the action's inputs keyed by
// input id, with the same absent/null distinction as PlannerInput.
type ActionInput struct {
	Inputs map[string]any `json:"inputs"`
}

// ActionResult is an action handler's output: values for the action's
// declared writes, or a declared refusal (Code, and optionally the input
// Field it concerns), never both.
type ActionResult struct {
	Writes  []ActionWrite `json:"writes,omitempty"`
	Refusal *Refusal      `json:"refusal,omitempty"`
}

// ActionWrite gives the values of one declared write of an action.
type ActionWrite struct {
	ID  string                     `json:"id"`
	Set map[string]json.RawMessage `json:"set"`
}

// DeclaredActionWrite is one write an action declares: its id and the fields
// a handler may give values for.
type DeclaredActionWrite struct {
	ID     string   `json:"id"`
	Fields []string `json:"fields"`
}
