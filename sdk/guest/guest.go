// Package guest lets a Registrum planner, hook handler or action handler be
// written as an ordinary Go function and compiled to WebAssembly:
//
//	GOOS=wasip1 GOARCH=wasm go build -buildmode=c-shared -o planner.wasm .
//
// The program registers its one handler from init and has an empty main:
//
//	func init() { guest.HandlePlan(plan) }
//	func main() {}
//
// The package implements the host's guest ABI (memory exports, input and
// output buffers, the entry point of each module kind) and a JSON reader and
// writer that avoid reflection, which is slow inside a WebAssembly guest.
// A module has no filesystem, network, environment or real clock: the host
// grants none, so the handler sees only its input and a plan is a pure
// function of the request.
//
// The registration functions and types build on every platform, so a
// handler's logic can be unit-tested with plain `go test`; only the exports
// are limited to GOOS=wasip1.
package guest

import (
	"bytes"
	"encoding/json"
	"fmt"
	"sync"

	"github.com/registrum/registrum/plugins/contract"
)

// The documents a module exchanges with the host (see package
// plugins/contract for their rules).
type (
	// PlanResult is a planner's output: effects or a refusal.
	PlanResult = contract.PlanResult
	// Effect is one write of a plan.
	Effect = contract.Effect
	// Target selects the record an effect writes.
	Target = contract.Target
	// FieldSource is where a set field's value comes from.
	FieldSource = contract.FieldSource
	// Refusal is a declared "no" carrying only a token.
	Refusal = contract.Refusal
	// HookResult is a hook handler's output.
	HookResult = contract.HookResult
	// ActionResult is an action handler's output.
	ActionResult = contract.ActionResult
	// ActionWrite gives the values of one declared write of an action.
	ActionWrite = contract.ActionWrite
	// Fields is the fast planner API's view of the request: members read
	// straight from the input bytes (see HandlePlanFast).
	Fields = contract.Fields
	// PlanWriter is the fast planner API's output: the plan's JSON written
	// as it is built (see HandlePlanFast).
	PlanWriter = contract.PlanWriter
)

// Operations an effect may have.
const (
	Create = contract.OperationCreate
	Patch  = contract.OperationPatch
)

// Request holds a draft request's declared fields keyed by authored field id.
// Values are nil (null), bool, string, json.Number, []any or map[string]any.
// A field the submitter never supplied is absent; an explicit null is present
// with a nil value.
type Request map[string]any

// Has reports whether the submitter supplied field name (null included).
func (r Request) Has(name string) bool {
	_, ok := r[name]
	return ok
}

// IsNull reports whether field name was supplied as an explicit null.
func (r Request) IsNull(name string) bool {
	v, ok := r[name]
	return ok && v == nil
}

// String returns field name when it is a string.
func (r Request) String(name string) (string, bool) {
	s, ok := r[name].(string)
	return s, ok
}

// Object returns field name when it is a JSON object.
func (r Request) Object(name string) (map[string]any, bool) {
	m, ok := r[name].(map[string]any)
	return m, ok
}

// Inputs holds an immediate action's inputs keyed by input id, with the same
// value types and absent/null distinction as Request.
type Inputs = Request

// Event is the exact captured event body a hook handler receives, and its
// parsed form.
type Event struct {
	// Raw is the body exactly as captured.
	Raw []byte
	// Body is Raw parsed: the envelope's members (id, type, source, subject,
	// time, dataschema, causation, data).
	Body map[string]any
}

// Value is a set source holding the literal v (nil, bool, string, numbers,
// json.Number, json.RawMessage, []any, []string, map[string]any,
// map[string]string). It panics on another type: that is a bug in the
// module, and the host sees it as a trap.
func Value(v any) FieldSource {
	// Size the buffer for a plain string so encoding allocates once: each
	// allocation costs about half a microsecond inside a WebAssembly guest.
	size := 16
	if s, ok := v.(string); ok {
		size = len(s) + 2
	}
	b, err := contract.AppendValue(make([]byte, 0, size), v)
	if err != nil {
		panic(fmt.Sprintf("guest.Value: %v", err))
	}
	return FieldSource{Value: json.RawMessage(b)}
}

// Write gives the values of the action's declared write id. Values take the
// same types as Value, and it panics on another type.
func Write(id string, values map[string]any) ActionWrite {
	set := make(map[string]json.RawMessage, len(values))
	for field, v := range values {
		set[field] = Value(v).Value
	}
	return ActionWrite{ID: id, Set: set}
}

// FromField is a set source taking the value of request field name.
func FromField(name string) FieldSource { return FieldSource{FromField: name} }

// FromEffect is a set source taking the id of the record made by the create
// effect id.
func FromEffect(id string) FieldSource { return FieldSource{FromEffect: id} }

// Refuse is a planner result that refuses the request with a short kind.
func Refuse(kind string) PlanResult { return PlanResult{Refusal: &Refusal{Kind: kind}} }

// Acknowledge is a hook result saying the event was handled.
func Acknowledge() HookResult { return HookResult{Outcome: contract.HookAcknowledged} }

// Retry is a hook result asking for the event to be retried later.
func Retry(kind string) HookResult { return HookResult{Outcome: contract.HookRetry, Kind: kind} }

// RefuseAction is an action result refusing with a declared code; field may
// name the input concerned, or be empty.
func RefuseAction(code, field string) ActionResult {
	return ActionResult{Refusal: &Refusal{Code: code, Field: field}}
}

var (
	planner       func(Request) PlanResult
	fastPlanner   func(Fields, *PlanWriter)
	hookHandler   func(Event) HookResult
	actionHandler func(Inputs) ActionResult
)

// HandlePlan registers the module's planner. Call it from init. A module has
// one planner: this replaces one registered with HandlePlanFast.
func HandlePlan(f func(Request) PlanResult) { planner, fastPlanner = f, nil }

// HandlePlanFast registers the module's planner written against the fast
// API. Call it from init. A module has one planner: this replaces one
// registered with HandlePlan.
//
// The fast API builds no map, `any` value or PlanResult: req reads the
// request's members straight from the input bytes, and the planner writes
// its plan into plan as it goes (plan.Patch, plan.SetFromField, plan.Clear,
// plan.Refuse, ...). Inside a WebAssembly guest, where each allocation costs
// about half a microsecond and a new map several, this makes a call several
// times cheaper than HandlePlan's map-based Request and PlanResult, and the
// output is byte for byte what HandlePlan writes for the same plan. In
// exchange, effects must be written in order (an effect's set members and
// clear list while it is the latest begun), and req and the strings it
// returns share the input buffer, which the host reuses on the next call:
// copy whatever the module keeps beyond the call.
//
// The input is checked exactly as for HandlePlan (strict JSON, the same
// nesting bound, an object holding only "request"); a bad input gets the
// same error output without the planner being called.
func HandlePlanFast(f func(req Fields, plan *PlanWriter)) { fastPlanner, planner = f, nil }

// HandleEvent registers the module's hook handler. Call it from init.
func HandleEvent(f func(Event) HookResult) { hookHandler = f }

// HandleAction registers the module's action handler. Call it from init.
func HandleAction(f func(Inputs) ActionResult) { actionHandler = f }

// RunPlan runs the registered planner on an input document and returns its
// output document, exactly as the host's call does. Tests use it to run a
// planner without a WebAssembly runtime.
func RunPlan(input []byte) []byte {
	s := scratchPool.Get().(*fastScratch)
	defer scratchPool.Put(s)
	return appendPlan(nil, input, s)
}

// scratchPool keeps the memory RunPlan's fast planner calls reuse, as a
// module's instance reuses its own.
var scratchPool = sync.Pool{New: func() any { return new(fastScratch) }}

// RunEvent runs the registered hook handler on an event body and returns
// its output document.
func RunEvent(input []byte) []byte { return appendEvent(nil, input) }

// RunAction runs the registered action handler on an input document and
// returns its output document.
func RunAction(input []byte) []byte { return appendAction(nil, input) }

// fastScratch is the memory a fast planner call reuses: the request's index
// and the plan writer's buffers.
type fastScratch struct {
	reader contract.FieldsReader
	writer PlanWriter
}

// appendPlan appends the registered planner's output for input to buf. A
// fast planner reuses s.
func appendPlan(buf, input []byte, s *fastScratch) []byte {
	if fastPlanner != nil {
		// No copy of the input: the view is used only during the call, and
		// the host does not touch its buffer until the call returns.
		req, err := s.reader.ReadObjectMember(input, "request")
		if err != nil {
			return append(buf, `{"error":"bad input"}`...)
		}
		s.writer.Reset(buf)
		fastPlanner(req, &s.writer)
		return s.writer.Finish()
	}
	if planner == nil {
		return append(buf, `{"error":"no planner registered"}`...)
	}
	// Parsed strings share the input's memory: give them a private copy,
	// as the host reuses its input buffer.
	req, err := contract.ParseObjectMember(bytes.Clone(input), "request")
	if err != nil {
		return append(buf, `{"error":"bad input"}`...)
	}
	return planner(req).AppendJSON(buf)
}

// appendEvent appends the registered hook handler's output for input to buf.
func appendEvent(buf, input []byte) []byte {
	if hookHandler == nil {
		return append(buf, `{"error":"no hook handler registered"}`...)
	}
	raw := bytes.Clone(input)
	v, err := contract.ParseCheckedValue(raw)
	body, ok := v.(map[string]any)
	if err != nil || !ok {
		return append(buf, `{"error":"bad input"}`...)
	}
	return hookHandler(Event{Raw: raw, Body: body}).AppendJSON(buf)
}

// appendAction appends the registered action handler's output for input to
// buf.
func appendAction(buf, input []byte) []byte {
	if actionHandler == nil {
		return append(buf, `{"error":"no action handler registered"}`...)
	}
	in, err := contract.ParseObjectMember(bytes.Clone(input), "inputs")
	if err != nil {
		return append(buf, `{"error":"bad input"}`...)
	}
	return actionHandler(in).AppendJSON(buf)
}
