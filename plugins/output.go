package plugins

import (
	"encoding/json"
	"fmt"

	"github.com/registrum/registrum/internal/canonjson"
	"github.com/registrum/registrum/plugins/contract"
)

// A module's output is read and re-written here without reflection: with
// encoding/json and a canonical re-encoding of the whole document, the
// host's side of a planner call cost twice the call itself.
//
// decodeOutput reads the document strictly with the contract's decoders
// (contract.DecodePlanResult and its siblings: exact member names, unknown
// and repeated members refused). canonicalOutput writes a validated result
// in its RFC 8785 form: members in sorted order, values canonicalised one
// by one.

// decodeOutput decodes a module's output document into out, a
// *contract.PlanResult, *contract.HookResult or *contract.ActionResult.
func decodeOutput(raw []byte, out any) error {
	var err error
	switch o := out.(type) {
	case *contract.PlanResult:
		*o, err = contract.DecodePlanResult(raw)
	case *contract.HookResult:
		*o, err = contract.DecodeHookResult(raw)
	case *contract.ActionResult:
		*o, err = contract.DecodeActionResult(raw)
	default:
		err = fmt.Errorf("plugins: no decoder for %T", out)
	}
	return err
}

// canonicalOutput returns the RFC 8785 form of a validated result, written
// with canonjson's appenders (one string escaping, one member order).
func canonicalOutput(out any) ([]byte, error) {
	switch o := out.(type) {
	case *contract.PlanResult:
		return appendCanonicalPlan(make([]byte, 0, 512), o)
	case *contract.HookResult:
		return appendCanonicalHook(nil, o), nil
	case *contract.ActionResult:
		return appendCanonicalAction(make([]byte, 0, 256), o)
	}
	return canonjson.Marshal(out)
}

// member appends `"key":"value"`, after a comma when comma is set.
func member(b []byte, comma bool, key, value string) []byte {
	if comma {
		b = append(b, ',')
	}
	return canonjson.AppendString(append(canonjson.AppendString(b, key), ':'), value)
}

// appendCanonicalValue appends the canonical form of a JSON value.
func appendCanonicalValue(b []byte, raw json.RawMessage) ([]byte, error) {
	c, err := canonjson.Transform(raw)
	if err != nil {
		return nil, err
	}
	return append(b, c...), nil
}

func appendCanonicalPlan(b []byte, r *contract.PlanResult) ([]byte, error) {
	var err error
	b = append(b, '{')
	if len(r.Effects) > 0 {
		b = append(b, `"effects":[`...)
		for i := range r.Effects {
			if i > 0 {
				b = append(b, ',')
			}
			if b, err = appendCanonicalEffect(b, &r.Effects[i]); err != nil {
				return nil, err
			}
		}
		b = append(b, ']')
	}
	if r.Refusal != nil {
		if len(r.Effects) > 0 {
			b = append(b, ',')
		}
		b = append(b, `"refusal":`...)
		b = appendCanonicalRefusal(b, r.Refusal)
	}
	return append(b, '}'), nil
}

// appendCanonicalEffect writes an effect's members in sorted order: clear,
// id, operation, set, target.
func appendCanonicalEffect(b []byte, e *contract.Effect) ([]byte, error) {
	var err error
	b = append(b, '{')
	if len(e.Clear) > 0 {
		b = append(b, `"clear":[`...)
		for i, f := range e.Clear {
			if i > 0 {
				b = append(b, ',')
			}
			b = canonjson.AppendString(b, f)
		}
		b = append(b, "],"...)
	}
	b = member(b, false, "id", e.ID)
	b = member(b, true, "operation", string(e.Operation))
	if len(e.Set) > 0 {
		b = append(b, `,"set":`...)
		if b, err = canonjson.AppendObject(b, e.Set, appendCanonicalSource); err != nil {
			return nil, err
		}
	}
	b = append(b, `,"target":{`...)
	b = member(b, false, "entity", e.Target.Entity)
	if e.Target.FromEffect != "" {
		b = member(b, true, "fromEffect", e.Target.FromEffect)
	}
	if e.Target.FromField != "" {
		b = member(b, true, "fromField", e.Target.FromField)
	}
	return append(b, "}}"...), nil
}

// appendCanonicalSource writes a set field's source: fromEffect,
// fromField, value, each when set.
func appendCanonicalSource(b []byte, src contract.FieldSource) ([]byte, error) {
	b = append(b, '{')
	comma := false
	if src.FromEffect != "" {
		b = member(b, comma, "fromEffect", src.FromEffect)
		comma = true
	}
	if src.FromField != "" {
		b = member(b, comma, "fromField", src.FromField)
		comma = true
	}
	if len(src.Value) > 0 {
		if comma {
			b = append(b, ',')
		}
		var err error
		if b, err = appendCanonicalValue(append(b, `"value":`...), src.Value); err != nil {
			return nil, err
		}
	}
	return append(b, '}'), nil
}

// appendCanonicalRefusal writes code, field, kind, each when set.
func appendCanonicalRefusal(b []byte, r *contract.Refusal) []byte {
	b = append(b, '{')
	comma := false
	for _, m := range [...]struct{ k, v string }{{"code", r.Code}, {"field", r.Field}, {"kind", r.Kind}} {
		if m.v == "" {
			continue
		}
		b = member(b, comma, m.k, m.v)
		comma = true
	}
	return append(b, '}')
}

func appendCanonicalHook(b []byte, r *contract.HookResult) []byte {
	b = append(b, '{')
	comma := false
	if r.Kind != "" {
		b = member(b, false, "kind", r.Kind)
		comma = true
	}
	b = member(b, comma, "outcome", string(r.Outcome))
	return append(b, '}')
}

func appendCanonicalAction(b []byte, r *contract.ActionResult) ([]byte, error) {
	var err error
	b = append(b, '{')
	if r.Refusal != nil {
		b = append(b, `"refusal":`...)
		b = appendCanonicalRefusal(b, r.Refusal)
	}
	if len(r.Writes) > 0 {
		if r.Refusal != nil {
			b = append(b, ',')
		}
		b = append(b, `"writes":[`...)
		for i, w := range r.Writes {
			if i > 0 {
				b = append(b, ',')
			}
			b = member(append(b, '{'), false, "id", w.ID)
			b = append(b, `,"set":`...)
			if w.Set == nil {
				b = append(b, "null"...)
			} else {
				if b, err = canonjson.AppendObject(b, w.Set, appendCanonicalValue); err != nil {
					return nil, err
				}
			}
			b = append(b, '}')
		}
		b = append(b, ']')
	}
	return append(b, '}'), nil
}
