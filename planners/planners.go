// Package planners turns a change request into the writes it will apply.
//
// Every request entity has one planner: declarative (the `effects` the
// project declares, evaluated by the host itself) or a reviewed plugin module
// (tengo or wasm, called through package plugins with its pinned digest).
// Whatever the kind, a plan is checked against the package (targets,
// operations, fields, value types; references only through fromField or
// fromEffect; a plugin's effects also against its declared writes, by
// package plugins), computed once when the request is submitted, and frozen
// with the module digest and its effect digest. It is never computed again:
// apply writes the frozen plan.
//
// The package imports model and plugins only: it never touches the database
// or HTTP. The change-request service of the record host calls it inside a
// submit, fills in the revisions its patch targets had, and stores the frozen
// plan.
package planners

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"regexp"
	"strconv"

	"github.com/registrum/registrum/internal/canonjson"
	"github.com/registrum/registrum/model"
	"github.com/registrum/registrum/model/values"
	"github.com/registrum/registrum/plugins"
	"github.com/registrum/registrum/plugins/contract"
)

// Planner kinds, as clients see them in GET /v1/registry.
const (
	KindDeclarative = "declarative"
	KindTengo       = "tengo"
	KindWASM        = "wasm"
)

// Refusal kinds: the only detail a client is told of a refused plan.
const (
	// RefusedByPlanner: the planner answered a refusal instead of a plan.
	RefusedByPlanner = "planner_refused"
	// RefusedEmpty: the plan has no effect.
	RefusedEmpty = "no_effects"
	// RefusedInvalid: an effect names what the package does not allow
	// (unknown target or field, a value of the wrong type, a missing
	// required field, a target reference that is not a record id).
	RefusedInvalid = "invalid_plan"
	// RefusedCeiling: the module hit a ceiling (memory, output size) or
	// broke its contract.
	RefusedCeiling = "ceiling_exceeded"
	// RefusedFailed: the module crashed.
	RefusedFailed = "planner_failed"
)

// Input is what a planner is given: the request record as submitted.
type Input struct {
	// RequestID is the request record's id; ProposalVersion the proposal
	// being submitted.
	RequestID       string
	ProposalVersion int64
	// Fields are the request record's fields by authored id, in wire form;
	// a field that holds null is absent.
	Fields map[string]any
}

// Value is the source of one written field in a frozen plan: a literal
// wire value, or the id of the record an earlier create effect made.
type Value struct {
	Value      any    `json:"value,omitempty"`
	FromEffect string `json:"fromEffect,omitempty"`
}

// MarshalJSON writes {"value": v}, {"value": null} or {"fromEffect": id}.
func (v Value) MarshalJSON() ([]byte, error) {
	if v.FromEffect != "" {
		return json.Marshal(map[string]any{"fromEffect": v.FromEffect})
	}
	return json.Marshal(map[string]any{"value": v.Value})
}

// Target is the record a write reaches: a new record of Entity (create), or
// the record RecordID or the one effect FromEffect created (patch).
type Target struct {
	Entity     string `json:"entity"`
	RecordID   string `json:"recordId,omitempty"`
	FromEffect string `json:"fromEffect,omitempty"`
}

// Write is one write of a frozen plan, in the order it is applied.
type Write struct {
	ID        string           `json:"id"`
	Operation string           `json:"operation"`
	Target    Target           `json:"target"`
	Set       map[string]Value `json:"set,omitempty"`
	Clear     []string         `json:"clear,omitempty"`
	// ExpectedRevision is the revision a patch target had when the plan was
	// frozen; apply refuses if it moved. Zero for creates and fromEffect
	// targets. The host fills it in before Freeze.
	ExpectedRevision int64 `json:"expectedRevision,omitempty"`
}

// Plan is a plan: its writes and, once frozen, its canonical form and the
// effect digest that binds review and apply to exactly these writes.
type Plan struct {
	Kind            string
	ModuleDigest    string
	ProposalVersion int64
	Writes          []Write
	// Canonical and EffectDigest are set by Freeze.
	Canonical    []byte
	EffectDigest string
}

// Freeze computes the plan's canonical form and its effect digest: the
// SHA-256 of the RFC 8785 form of {proposalVersion, writes}.
func (p *Plan) Freeze() error {
	doc := map[string]any{"proposalVersion": p.ProposalVersion, "writes": p.Writes}
	b, err := canonjson.Marshal(doc)
	if err != nil {
		return fmt.Errorf("planners: canonical plan: %w", err)
	}
	sum := sha256.Sum256(b)
	p.Canonical, p.EffectDigest = b, "sha256:"+hex.EncodeToString(sum[:])
	return nil
}

// ParseFrozen reads a frozen plan's writes back from its canonical form.
// The plan is decoded once, numbers kept as json.Number.
func ParseFrozen(b []byte) ([]Write, error) {
	var doc struct {
		Writes []struct {
			ID        string `json:"id"`
			Operation string `json:"operation"`
			Target    Target `json:"target"`
			Set       map[string]struct {
				Value      any    `json:"value"`
				FromEffect string `json:"fromEffect"`
			} `json:"set"`
			Clear    []string `json:"clear"`
			Expected int64    `json:"expectedRevision"`
		} `json:"writes"`
	}
	if err := decodeNumbers(b, &doc); err != nil {
		return nil, fmt.Errorf("planners: frozen plan: %w", err)
	}
	out := make([]Write, len(doc.Writes))
	for i, w := range doc.Writes {
		out[i] = Write{ID: w.ID, Operation: w.Operation, Target: w.Target, Clear: w.Clear, ExpectedRevision: w.Expected}
		if len(w.Set) > 0 {
			out[i].Set = make(map[string]Value, len(w.Set))
		}
		for f, v := range w.Set {
			out[i].Set[f] = Value{Value: v.Value, FromEffect: v.FromEffect}
		}
	}
	return out, nil
}

// FrozenTargets reads the entity each write of a frozen plan targets, in
// write order, without decoding the values it writes.
func FrozenTargets(b []byte) ([]string, error) {
	var doc struct {
		Writes []struct {
			Target struct {
				Entity string `json:"entity"`
			} `json:"target"`
		} `json:"writes"`
	}
	if err := json.Unmarshal(b, &doc); err != nil {
		return nil, fmt.Errorf("planners: frozen plan: %w", err)
	}
	out := make([]string, len(doc.Writes))
	for i, w := range doc.Writes {
		out[i] = w.Target.Entity
	}
	return out, nil
}

// IsNull reports whether v is a literal null.
func (v Value) IsNull() bool { return v.FromEffect == "" && v.Value == nil }

// A Planner computes the plan of a request entity's requests.
type Planner interface {
	// Kind returns the planner kind: declarative, tengo or wasm.
	Kind() string
	// Plan computes and checks the plan of one submission (not frozen). It
	// returns a *Refusal when the planner yields no usable plan, and an
	// error wrapping ErrDeadline when it ran out of time.
	Plan(ctx context.Context, in Input) (*Plan, error)
}

// ErrDeadline means the planner ran out of its time budget.
var ErrDeadline = errors.New("planners: the planner ran out of time")

// Refusal is a planner's refusal to plan. Kind is the only detail a client
// is told (as request.plan_refused); Cause stays in the operator's log.
type Refusal struct {
	Kind  string
	Cause error
}

// Error returns the kind of refusal.
func (r *Refusal) Error() string {
	if r.Cause != nil {
		return "planner refused: " + r.Kind + ": " + r.Cause.Error()
	}
	return "planner refused: " + r.Kind
}

// Unwrap returns the cause.
func (r *Refusal) Unwrap() error { return r.Cause }

func refuse(kind string, format string, args ...any) *Refusal {
	return &Refusal{Kind: kind, Cause: fmt.Errorf(format, args...)}
}

// Set holds the planner of every request entity of a package.
type Set struct {
	byEntity map[string]Planner
}

// New builds the planners of every request entity of pkg. Plugin planners
// call modules of mods (nil when the package has none).
func New(pkg *model.Package, mods *plugins.Set) (*Set, error) {
	codec, err := values.NewCodec(pkg)
	if err != nil {
		return nil, err
	}
	s := &Set{byEntity: map[string]Planner{}}
	for _, e := range pkg.Entities {
		cr := e.ChangeRequest
		if cr == nil {
			continue
		}
		r := &resolver{pkg: pkg, codec: codec}
		if cr.Planner == nil {
			s.byEntity[e.ID] = &declarative{r: r, effects: declaredEffects(cr.Effects)}
			continue
		}
		m := pkg.ModuleByID(cr.Planner.Module)
		if m == nil {
			return nil, fmt.Errorf("planners: entity %s: planner module %q is not in the package", e.ID, cr.Planner.Module)
		}
		if mods == nil {
			return nil, fmt.Errorf("planners: entity %s: planner module %q is not loaded", e.ID, m.ID)
		}
		s.byEntity[e.ID] = &module{r: r, mods: mods, id: m.ID, kind: string(m.Engine), digest: m.SHA256}
	}
	return s, nil
}

// For returns the planner of request entity e, or nil.
func (s *Set) For(e *model.Entity) Planner { return s.byEntity[e.ID] }

// Modules returns the plugin modules the package's planners need, with their
// declared writes, ready for plugins.Runtime.Load.
func Modules(pkg *model.Package) []plugins.Module {
	var out []plugins.Module
	for _, e := range pkg.Entities {
		if e.ChangeRequest == nil || e.ChangeRequest.Planner == nil {
			continue
		}
		m := pkg.ModuleByID(e.ChangeRequest.Planner.Module)
		if m == nil {
			continue
		}
		writes := []contract.Write{}
		for _, w := range e.ChangeRequest.Planner.Writes {
			writes = append(writes, contract.Write{Entity: w.Target.Entity, Operation: contract.Operation(w.Operation), Fields: w.Fields})
		}
		out = append(out, plugins.Module{Module: *m, Writes: writes})
	}
	return out
}

// declaredEffects turns the project's effects into the plugin contract's
// shape, so that both kinds of planner are resolved by one resolver.
func declaredEffects(effects []*model.Effect) []contract.Effect {
	out := make([]contract.Effect, len(effects))
	for i, e := range effects {
		c := contract.Effect{ID: e.ID, Operation: contract.Operation(e.Operation), Clear: e.Clear,
			Target: contract.Target{Entity: e.Target.Entity, FromField: e.Target.FromField, FromEffect: e.Target.FromEffect}}
		if len(e.Set) > 0 {
			c.Set = map[string]contract.FieldSource{}
		}
		for _, s := range e.Set {
			src := contract.FieldSource{FromField: s.FromField, FromEffect: s.FromEffect}
			if s.FromField == "" && s.FromEffect == "" {
				raw, _ := json.Marshal(s.Value)
				src.Value = raw
			}
			c.Set[s.Field] = src
		}
		out[i] = c
	}
	return out
}

type declarative struct {
	r       *resolver
	effects []contract.Effect
}

func (d *declarative) Kind() string { return KindDeclarative }

func (d *declarative) Plan(_ context.Context, in Input) (*Plan, error) {
	writes, err := d.r.resolve(in, d.effects)
	if err != nil {
		return nil, err
	}
	return &Plan{Kind: KindDeclarative, ProposalVersion: in.ProposalVersion, Writes: writes}, nil
}

type module struct {
	r      *resolver
	mods   *plugins.Set
	id     string
	kind   string
	digest string
}

func (m *module) Kind() string { return m.kind }

// safeKind is the shape of a planner's refusal kind that may be echoed.
var safeKind = regexp.MustCompile(`^[a-z][a-z0-9_]{0,63}$`)

func (m *module) Plan(ctx context.Context, in Input) (*Plan, error) {
	res, err := m.mods.Plan(ctx, m.id, contract.PlannerInput{Request: in.Fields})
	if err != nil {
		switch plugins.FailureKindOf(err) {
		case plugins.FailureTimeout:
			return nil, fmt.Errorf("%w: %w", ErrDeadline, err)
		case plugins.FailureMemory, plugins.FailureInvalidOutput, plugins.FailureRefused:
			return nil, &Refusal{Kind: RefusedCeiling, Cause: err}
		case plugins.FailureTrap:
			return nil, &Refusal{Kind: RefusedFailed, Cause: err}
		}
		if errors.Is(err, context.DeadlineExceeded) {
			return nil, fmt.Errorf("%w: %w", ErrDeadline, err)
		}
		return nil, err
	}
	if res.Refusal != nil {
		kind := RefusedByPlanner
		if safeKind.MatchString(res.Refusal.Kind) {
			kind = res.Refusal.Kind
		}
		return nil, &Refusal{Kind: kind, Cause: errors.New("the planner refused")}
	}
	writes, err := m.r.resolve(in, res.Effects)
	if err != nil {
		return nil, err
	}
	return &Plan{Kind: m.kind, ModuleDigest: m.digest, ProposalVersion: in.ProposalVersion, Writes: writes}, nil
}

// resolver turns effects into writes: request fields become literal values
// checked against the target field, target references become record ids.
type resolver struct {
	pkg   *model.Package
	codec *values.Codec
}

func (r *resolver) resolve(in Input, effects []contract.Effect) ([]Write, error) {
	if len(effects) == 0 {
		return nil, refuse(RefusedEmpty, "the plan has no effect")
	}
	created := map[string]bool{}
	out := make([]Write, 0, len(effects))
	for i, e := range effects {
		target := r.pkg.EntityByID(e.Target.Entity)
		if target == nil || target.IsRequestEntity() {
			return nil, refuse(RefusedInvalid, "effect %d: unknown target entity %q", i, e.Target.Entity)
		}
		w := Write{ID: e.ID, Operation: string(e.Operation), Target: Target{Entity: target.ID}}
		switch e.Operation {
		case contract.OperationCreate:
			if e.ID == "" {
				return nil, refuse(RefusedInvalid, "effect %d: a create needs an id", i)
			}
		case contract.OperationPatch:
			switch {
			case e.Target.FromEffect != "":
				if !created[e.Target.FromEffect] {
					return nil, refuse(RefusedInvalid, "effect %d: fromEffect %q names no earlier create", i, e.Target.FromEffect)
				}
				w.Target.FromEffect = e.Target.FromEffect
			case e.Target.FromField != "":
				id, _ := in.Fields[e.Target.FromField].(string)
				if !values.IsUUID(id) {
					return nil, refuse(RefusedInvalid, "effect %d: request field %q holds no record id", i, e.Target.FromField)
				}
				w.Target.RecordID = id
			default:
				return nil, refuse(RefusedInvalid, "effect %d: a patch names its target", i)
			}
		default:
			return nil, refuse(RefusedInvalid, "effect %d: unknown operation %q", i, e.Operation)
		}
		for field, src := range e.Set {
			f := target.Field(field)
			if f == nil {
				return nil, refuse(RefusedInvalid, "effect %d: %s has no field %q", i, target.ID, field)
			}
			v, err := r.value(in, f, src, created)
			if err != nil {
				return nil, refuse(RefusedInvalid, "effect %d: %s: %v", i, field, err)
			}
			if w.Set == nil {
				w.Set = map[string]Value{}
			}
			w.Set[field] = v
		}
		for _, field := range e.Clear {
			f := target.Field(field)
			if f == nil || f.Required {
				return nil, refuse(RefusedInvalid, "effect %d: cannot clear %s.%s", i, target.ID, field)
			}
			if _, both := w.Set[field]; both {
				return nil, refuse(RefusedInvalid, "effect %d: %s is both set and cleared", i, field)
			}
			w.Clear = append(w.Clear, field)
		}
		if e.Operation == contract.OperationCreate {
			for _, f := range target.Fields {
				if v, ok := w.Set[f.ID]; f.Required && (!ok || v.IsNull()) {
					return nil, refuse(RefusedInvalid, "effect %d: %s.%s is required", i, target.ID, f.ID)
				}
			}
			created[e.ID] = true
		}
		out = append(out, w)
	}
	return out, nil
}

// value resolves and checks one field source against target field f.
func (r *resolver) value(in Input, f *model.Field, src contract.FieldSource, created map[string]bool) (Value, error) {
	switch {
	case src.FromEffect != "":
		if f.Type != model.TypeReference || !created[src.FromEffect] {
			return Value{}, fmt.Errorf("fromEffect %q is not an earlier create a reference field can hold", src.FromEffect)
		}
		return Value{FromEffect: src.FromEffect}, nil
	case src.FromField != "":
		return r.literal(f, in.Fields[src.FromField])
	default:
		var v any
		if len(src.Value) > 0 {
			if err := decodeNumbers(src.Value, &v); err != nil {
				return Value{}, err
			}
		}
		return r.literal(f, v)
	}
}

func (r *resolver) literal(f *model.Field, wire any) (Value, error) {
	if n, ok := wire.(int64); ok { // a stored integer, as the host reads it
		wire = json.Number(strconv.FormatInt(n, 10))
	}
	stored, err := r.codec.Decode(f, wire)
	if err != nil {
		return Value{}, err
	}
	return Value{Value: values.Encode(f, stored)}, nil
}

// decodeNumbers decodes JSON keeping numbers as json.Number, as the value
// checker reads them.
func decodeNumbers(b []byte, v any) error {
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.UseNumber()
	return dec.Decode(v)
}
