// Package actions is the record host's immediate actions: POST
// /v1/actions/{action} and its target-conditions read. An action's handler
// module (if any) computes declared values or refuses with a declared code;
// its effects are then written in one transaction through the record
// kernel (host/records), each patch target locked and checked against its
// precondition and the action's target row boundaries. It knows nothing of
// HTTP; refusals are problem.Error values.
package actions

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"net/http"
	"slices"
	"strconv"

	"github.com/google/uuid"

	"github.com/registrum/registrum/host/access"
	"github.com/registrum/registrum/host/problem"
	"github.com/registrum/registrum/host/records"
	"github.com/registrum/registrum/internal/canonjson"
	"github.com/registrum/registrum/internal/strictjson"
	"github.com/registrum/registrum/model"
	"github.com/registrum/registrum/model/values"
	"github.com/registrum/registrum/plugins/contract"
	"github.com/registrum/registrum/store"
	"github.com/registrum/registrum/store/layout"
)

// Handlers runs the reviewed handler modules of immediate actions
// (plugins.Set implements it).
type Handlers interface {
	ComputeAction(ctx context.Context, moduleID string, in contract.ActionInput) (contract.ActionResult, error)
}

// Options configure the immediate actions.
type Options struct {
	// Records is the record kernel the effects are written through.
	// Required.
	Records *records.Service
	// Access decides the caller's invoke grant; a decider that decides no
	// actions (not an access.ActionDecider), or nil, conceals every action.
	Access access.Decider
	// Handlers runs the loaded handler modules; nil answers
	// service.unavailable to an action with a handler.
	Handlers Handlers
}

// Service serves the immediate actions of one package.
type Service struct {
	records  *records.Service
	pkg      *model.Package
	store    *store.Store
	keys     records.Keys
	codec    *values.Codec
	decider  access.ActionDecider
	handlers Handlers
}

// New returns the immediate actions over o.Records.
func New(o Options) (*Service, error) {
	if o.Records == nil {
		return nil, errors.New("actions: Options.Records is required")
	}
	k := o.Records
	s := &Service{records: k, pkg: k.Package(), store: k.Store(), keys: k.Keys(), codec: k.Codec(), handlers: o.Handlers}
	if d, ok := o.Access.(access.ActionDecider); ok {
		s.decider = d
	}
	return s, nil
}

// actionCall is a parsed, checked action body.
type actionCall struct {
	action *model.Action
	grant  *access.ActionGrant
	// inputs are the storage values by input id; wire by input id for a handler.
	inputs map[string]any
	wire   map[string]any
	// ifMatch are the preconditions of the body, by effect id.
	ifMatch map[string]string
}

// admitAction decides the caller's invoke grant, then judges the body: an
// object with input (and, for an invocation, preconditions). A caller
// without the grant gets the concealed not-found whatever the body.
func (s *Service) admitAction(ctx context.Context, c records.Call, actionID string, raw records.Body, invoke bool) (*actionCall, error) {
	a := s.pkg.ActionByID(actionID)
	d := s.decider
	if a == nil || d == nil {
		return nil, problem.NotFound()
	}
	g, err := d.DecideAction(ctx, access.ActionRequest{Action: a, Bearer: c.Bearer, UnusableCredential: c.UnusableCredential, Profile: c.Profile})
	if err != nil {
		return nil, err
	}
	body, err := raw.Bytes()
	if err != nil {
		return nil, err
	}
	top, err := records.ActionBodyObject(body, "the body must be a JSON object with an input member")
	if err != nil {
		return nil, err
	}
	for _, k := range slices.Sorted(maps.Keys(top)) {
		if k != "input" && (!invoke || k != "preconditions") {
			return nil, problem.At(problem.RequestInvalid, strictjson.Pointer(k), "unknown member %q of an action body", k)
		}
	}
	in, ok := top["input"].(map[string]any)
	if !ok {
		return nil, problem.At(problem.RequestInvalid, "/input", "input is required: an object of the action's inputs")
	}
	call := &actionCall{action: a, grant: g, inputs: map[string]any{}, wire: map[string]any{}, ifMatch: map[string]string{}}
	for _, name := range slices.Sorted(maps.Keys(in)) {
		var f *model.Field
		for _, cand := range a.Inputs {
			if cand.APIName == name {
				f = cand
			}
		}
		if f == nil {
			return nil, problem.At(problem.RequestInvalid, strictjson.Pointer("input", name), "unknown input %q of action %s", name, a.ID)
		}
		v, err := s.codec.Decode(f, in[name])
		if err != nil {
			var fault *values.Fault
			if errors.As(err, &fault) {
				return nil, problem.At(problem.RequestInvalid, strictjson.Pointer("input", name), "%s", fault.Msg)
			}
			return nil, err
		}
		if v != nil {
			call.inputs[f.ID] = v
			call.wire[f.ID] = values.Encode(f, v)
		}
	}
	for _, f := range a.Inputs {
		if f.Required && call.inputs[f.ID] == nil {
			return nil, problem.At(problem.RequestInvalid, strictjson.Pointer("input", f.APIName), "input %s is required", f.APIName)
		}
	}
	if raw, present := top["preconditions"]; present {
		pre, ok := raw.(map[string]any)
		if !ok {
			return nil, problem.At(problem.RequestInvalid, "/preconditions", "preconditions must be an object keyed by effect id")
		}
		for _, id := range slices.Sorted(maps.Keys(pre)) {
			ef := effectByID(a, id)
			if ef == nil || ef.Operation != model.EffectPatch {
				return nil, problem.At(problem.RequestInvalid, strictjson.Pointer("preconditions", id), "%q is not a patch effect of action %s", id, a.ID)
			}
			m, ok := pre[id].(map[string]any)
			im, _ := m["ifMatch"].(string)
			if !ok || len(m) != 1 || im == "" {
				return nil, problem.At(problem.RequestInvalid, strictjson.Pointer("preconditions", id), "a precondition is {\"ifMatch\": <the target's ETag>}")
			}
			call.ifMatch[id] = im
		}
	}
	return call, nil
}

func effectByID(a *model.Action, id string) *model.Effect {
	for _, ef := range a.Effects {
		if ef.ID == id {
			return ef
		}
	}
	return nil
}

// targetOf returns the entity and, for a patch of an existing record named
// by an input, the record id an effect reaches ("" for a create or a
// record an earlier effect creates).
func (s *Service) targetOf(call *actionCall, ef *model.Effect, created map[string]string) (*model.Entity, string) {
	e := s.pkg.EntityByID(ef.Target.Entity)
	switch {
	case ef.Operation != model.EffectPatch:
		return e, ""
	case ef.Target.FromEffect != "":
		return e, created[ef.Target.FromEffect]
	}
	id, _ := call.inputs[ef.Target.FromField].(string)
	return e, id
}

// admitsTarget reports whether the grant's targets allow records of e with
// these values.
func admitsTarget(g *access.ActionGrant, e *model.Entity, vals map[string]any) bool {
	if g.Targets == nil {
		return true // Unrestricted
	}
	b, ok := g.Targets[e.ID]
	return ok && b.Admits(vals)
}

// TargetConditions answers POST /v1/actions/{action}/target-conditions:
// the existing records the action's patch effects would touch for this
// input, each with the ifMatch an invocation names. A target that does not
// exist or lies outside the action's target row boundaries is not found.
func (s *Service) TargetConditions(ctx context.Context, c records.Call, actionID string, body records.Body) (*records.Result, error) {
	call, err := s.admitAction(ctx, c, actionID, body, false)
	if err != nil {
		return nil, err
	}
	type condition struct {
		Entity   string `json:"entity"`
		RecordID string `json:"recordId"`
		IfMatch  string `json:"ifMatch"`
	}
	pre := map[string]condition{}
	for _, ef := range call.action.Effects {
		e, id := s.targetOf(call, ef, nil)
		if ef.Operation != model.EffectPatch || id == "" {
			continue
		}
		rec, err := s.store.Get(ctx, e, id)
		if errors.Is(err, store.ErrNotFound) || (err == nil && (rec.Lifecycle != layout.LifecycleActive || !admitsTarget(call.grant, e, rec.Values))) {
			return nil, problem.NotFound()
		}
		if err != nil {
			return nil, err
		}
		pre[ef.ID] = condition{Entity: e.ID, RecordID: id, IfMatch: s.keys.ETag(s.pkg.Revision, e.ID, id, strconv.FormatInt(rec.Revision, 10), string(records.JSON))}
	}
	b, err := json.Marshal(map[string]any{"preconditions": pre})
	if err != nil {
		return nil, err
	}
	return &records.Result{Status: http.StatusOK, Body: b}, nil
}

// Invoke answers POST /v1/actions/{action}: the handler (if any)
// computes its declared values or refuses with a declared code; then, in
// one transaction, every effect is written in order, each patch target
// locked and checked against the body's ifMatch for its effect and the
// action's preconditions (any mismatch: 412 with nothing written) and
// every record an effect reaches against the action's target row
// boundaries. It needs an Idempotency-Key.
func (s *Service) Invoke(ctx context.Context, c records.Call, actionID string, in records.Body) (*records.Result, error) {
	call, err := s.admitAction(ctx, c, actionID, in, true)
	if err != nil {
		return nil, err
	}
	a := call.action
	if c.IdempotencyKey == "" {
		return nil, problem.New(problem.RequestInvalid, "an immediate action needs an Idempotency-Key header")
	}
	for _, ef := range a.Effects {
		if _, id := s.targetOf(call, ef, nil); ef.Operation == model.EffectPatch && id != "" && call.ifMatch[ef.ID] == "" {
			return nil, problem.New(problem.PreconditionRequired, "effect %s patches an existing record: name its ETag in preconditions.%s.ifMatch (see target-conditions)", ef.ID, ef.ID)
		}
	}
	body, _ := in.Bytes() // judged by admitAction
	idem, err := s.records.Idempotency(c, &access.Grant{PrincipalReference: call.grant.PrincipalReference, Profile: call.grant.Profile}, "action", a.ID, string(body))
	if err != nil {
		return nil, err
	}
	stored, err := s.store.Stored(ctx, idem)
	if err != nil {
		return nil, records.StoreRefusal(err)
	}
	if stored != nil {
		return &records.Result{Status: stored.Status, Body: stored.Body, Replayed: true}, nil
	}
	computed, err := s.runHandler(ctx, call)
	if err != nil {
		return nil, err
	}
	first := s.pkg.EntityByID(a.Effects[0].Target.Entity)
	return s.records.Write(ctx, first, idem, func(w *store.Writer) (*store.Outcome, error) {
		return s.applyAction(ctx, w, c, call, computed)
	})
}

// runHandler runs the action's handler module, returning the values it
// gives by effect id then target field id (wire form).
func (s *Service) runHandler(ctx context.Context, call *actionCall) (map[string]map[string]json.RawMessage, error) {
	h := call.action.Handler
	if h == nil {
		return nil, nil
	}
	if s.handlers == nil {
		return nil, problem.New(problem.ServiceUnavailable, "the handler of action %s is not loaded on this host", call.action.ID)
	}
	res, err := s.handlers.ComputeAction(ctx, h.Module, contract.ActionInput{Inputs: call.wire})
	if err != nil {
		if errors.Is(err, context.DeadlineExceeded) {
			return nil, &problem.Error{Code: problem.ServiceUnavailable, Detail: "the action's handler ran out of its time budget; try again", Cause: err}
		}
		return nil, &problem.Error{Code: problem.ServiceUnavailable, Detail: "the action's handler failed", Cause: err}
	}
	if r := res.Refusal; r != nil {
		pe := &problem.Error{Code: problem.ActionRefused, Detail: "the action's handler refused: " + r.Code}
		if f := call.action.Input(r.Field); f != nil {
			p := strictjson.Pointer("input", f.APIName)
			pe.FieldPath = &p
		}
		return nil, pe
	}
	out := map[string]map[string]json.RawMessage{}
	for _, wr := range res.Writes {
		out[wr.ID] = wr.Set
	}
	return out, nil
}

// applyAction writes the effects in one transaction.
func (s *Service) applyAction(ctx context.Context, w *store.Writer, c records.Call, call *actionCall, computed map[string]map[string]json.RawMessage) (*store.Outcome, error) {
	a := call.action
	type result struct {
		Entity   string `json:"entity"`
		RecordID string `json:"recordId"`
		Revision int64  `json:"revision"`
	}
	created := map[string]string{}
	results := make([]result, 0, len(a.Effects))
	principal := &access.Grant{PrincipalReference: call.grant.PrincipalReference}
	for _, ef := range a.Effects {
		e, id := s.targetOf(call, ef, created)
		if e == nil {
			return nil, fmt.Errorf("actions: action %s effect %s names an unknown entity", a.ID, ef.ID)
		}
		vals := map[string]any{}
		var cur *store.Record
		if ef.Operation == model.EffectPatch {
			var err error
			cur, err = w.Lock(ctx, e, id)
			if errors.Is(err, store.ErrNotFound) || (err == nil && (cur.Lifecycle != layout.LifecycleActive || !admitsTarget(call.grant, e, cur.Values))) {
				return nil, problem.NotFound()
			}
			if err != nil {
				return nil, err
			}
			if im, named := call.ifMatch[ef.ID]; named && !s.records.Matches(im, cur) {
				return nil, problem.New(problem.PreconditionFailed, "the target of effect %s changed since its ifMatch was read", ef.ID)
			}
			if err := s.checkPreconditions(call, ef, e, cur); err != nil {
				return nil, err
			}
			for k, v := range cur.Values {
				vals[k] = v
			}
		}
		for _, sf := range ef.Set {
			f := e.Field(sf.Field)
			var v any
			switch {
			case sf.FromField != "":
				v = call.inputs[sf.FromField]
			case sf.FromEffect != "":
				v = created[sf.FromEffect]
			default:
				var err error
				if v, err = s.codec.Decode(f, sf.Value); err != nil {
					return nil, fmt.Errorf("actions: action %s effect %s: literal for %s: %w", a.ID, ef.ID, f.ID, err)
				}
			}
			setValue(vals, f.ID, v)
		}
		for _, field := range ef.Clear {
			delete(vals, field)
		}
		for field, raw := range computed[ef.ID] {
			f := e.Field(field)
			if f == nil {
				return nil, fmt.Errorf("actions: action %s handler set unknown field %s.%s", a.ID, e.ID, field)
			}
			wire, err := strictjson.Decode(raw)
			if err != nil {
				return nil, fmt.Errorf("actions: action %s handler value for %s: %w", a.ID, field, err)
			}
			v, err := s.codec.Decode(f, wire)
			if err != nil {
				return nil, &problem.Error{Code: problem.ServiceUnavailable, Detail: "the action's handler gave a value that does not fit " + f.APIName, Cause: err}
			}
			setValue(vals, f.ID, v)
		}
		for _, f := range e.Fields {
			if f.Required && vals[f.ID] == nil {
				return nil, problem.New(problem.RequestInvalid, "effect %s leaves the required field %s of %s empty", ef.ID, f.APIName, e.ID)
			}
		}
		if !admitsTarget(call.grant, e, vals) {
			return nil, problem.NotFound()
		}
		var rec *store.Record
		var err error
		if ef.Operation == model.EffectCreate {
			rid := uuid.NewString()
			j, jerr := s.records.Journal(c, principal, e, rid, vals)
			if jerr != nil {
				return nil, jerr
			}
			rec, err = w.Create(ctx, e, rid, vals, j)
			if err == nil {
				created[ef.ID] = rid
			}
		} else {
			j, jerr := s.records.Journal(c, principal, e, id, vals)
			if jerr != nil {
				return nil, jerr
			}
			rec, err = w.Update(ctx, e, id, cur.Revision, vals, j)
		}
		if err != nil {
			return nil, s.records.WriteRefusal(e, err)
		}
		results = append(results, result{Entity: e.ID, RecordID: rec.ID, Revision: rec.Revision})
	}
	b, err := json.Marshal(map[string]any{"action": a.ID, "applicationId": uuid.NewString(), "results": results})
	if err != nil {
		return nil, err
	}
	return &store.Outcome{Status: http.StatusOK, Body: b}, nil
}

func setValue(vals map[string]any, field string, v any) {
	if v == nil {
		delete(vals, field)
		return
	}
	vals[field] = v
}

// checkPreconditions tests the action's preconditions on a patch target.
func (s *Service) checkPreconditions(call *actionCall, ef *model.Effect, e *model.Entity, cur *store.Record) error {
	for _, pc := range call.action.Preconditions {
		if pc.Effect != ef.ID {
			continue
		}
		f := e.Field(pc.Field)
		want := pc.Equals
		if pc.EqualsInput != "" {
			want = values.Encode(call.action.Input(pc.EqualsInput), call.inputs[pc.EqualsInput])
		}
		got, err1 := canonjson.Marshal(values.Encode(f, cur.Values[f.ID]))
		exp, err2 := canonjson.Marshal(want)
		if err1 != nil || err2 != nil {
			return fmt.Errorf("actions: precondition of %s: %w", ef.ID, errors.Join(err1, err2))
		}
		if string(got) != string(exp) {
			return problem.New(problem.PreconditionFailed, "the target of effect %s does not meet the action's precondition on %s", ef.ID, f.APIName)
		}
	}
	return nil
}
