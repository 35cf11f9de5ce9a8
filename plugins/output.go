package plugins

import (
	"encoding/json"
	"errors"
	"fmt"
	"slices"

	"github.com/registrum/registrum/internal/canonjson"
	"github.com/registrum/registrum/plugins/contract"
)

// A module's output is read and re-written here without reflection: with
// encoding/json and a canonical re-encoding of the whole document, the
// host's side of a planner call cost twice the call itself.
//
// decodeOutput reads the document into the kind's result type. It accepts
// what a strict encoding/json decoder with DisallowUnknownFields accepts,
// except that member names must match exactly (encoding/json also accepts
// them in another case). As there, a null leaves a member at its zero
// value, the last of duplicate members wins, and a present null value of
// a set field is kept as the literal null.
//
// canonicalOutput writes a validated result in its RFC 8785 form: members
// in sorted order, values canonicalised one by one.

// decodeOutput decodes a module's output document into out, a
// *contract.PlanResult, *contract.HookResult or *contract.ActionResult.
func decodeOutput(raw []byte, out any) error {
	doc, err := contract.ParseValue(raw)
	if err != nil {
		return err
	}
	switch o := out.(type) {
	case *contract.PlanResult:
		return decodePlan(doc, o)
	case *contract.HookResult:
		return decodeHook(doc, o)
	case *contract.ActionResult:
		return decodeAction(doc, o)
	}
	return fmt.Errorf("plugins: no decoder for %T", out)
}

// The readers below return errors without a location; callers add it, so
// that no location string is built on the way to a successful decode.

// object returns v as an object whose members are all in allowed; a null
// is an empty object.
func object(v any, allowed ...string) (map[string]any, error) {
	if v == nil {
		return nil, nil
	}
	m, ok := v.(map[string]any)
	if !ok {
		return nil, errors.New("not an object")
	}
	for k := range m {
		if !slices.Contains(allowed, k) {
			return nil, fmt.Errorf("unknown member %q", k)
		}
	}
	return m, nil
}

// array returns v as an array; a null is an empty array.
func array(v any) ([]any, error) {
	if v == nil {
		return nil, nil
	}
	a, ok := v.([]any)
	if !ok {
		return nil, errors.New("not an array")
	}
	return a, nil
}

// texts reads string members of m into the targets named alongside them; a
// null or absent member is "".
func texts(m map[string]any, pairs ...any) error {
	for i := 0; i < len(pairs); i += 2 {
		name, dst := pairs[i].(string), pairs[i+1].(*string)
		v := m[name]
		if v == nil {
			*dst = ""
			continue
		}
		s, ok := v.(string)
		if !ok {
			return fmt.Errorf("%s: not a string", name)
		}
		*dst = s
	}
	return nil
}

func decodePlan(doc any, out *contract.PlanResult) error {
	m, err := object(doc, "effects", "refusal")
	if err != nil {
		return err
	}
	*out = contract.PlanResult{}
	if out.Refusal, err = decodeRefusal(m["refusal"]); err != nil {
		return fmt.Errorf("refusal: %w", err)
	}
	effects, err := array(m["effects"])
	if err != nil {
		return fmt.Errorf("effects: %w", err)
	}
	if len(effects) > 0 {
		out.Effects = make([]contract.Effect, len(effects))
	}
	for i, ev := range effects {
		if err := decodeEffect(ev, &out.Effects[i]); err != nil {
			return fmt.Errorf("effects[%d]%w", i, err)
		}
	}
	return nil
}

// decodeEffect reads one effect; its errors start with the member path
// (".target: ...").
func decodeEffect(v any, e *contract.Effect) error {
	em, err := object(v, "id", "operation", "target", "set", "clear")
	if err != nil {
		return fmt.Errorf(": %w", err)
	}
	var op string
	if err := texts(em, "id", &e.ID, "operation", &op); err != nil {
		return fmt.Errorf(".%w", err)
	}
	e.Operation = contract.Operation(op)
	tm, err := object(em["target"], "entity", "fromField", "fromEffect")
	if err == nil {
		err = texts(tm, "entity", &e.Target.Entity, "fromField", &e.Target.FromField, "fromEffect", &e.Target.FromEffect)
	}
	if err != nil {
		return fmt.Errorf(".target: %w", err)
	}
	if sv := em["set"]; sv != nil {
		set, ok := sv.(map[string]any)
		if !ok {
			return errors.New(".set: not an object")
		}
		e.Set = make(map[string]contract.FieldSource, len(set))
		for field, fv := range set {
			var fs contract.FieldSource
			src, err := object(fv, "value", "fromField", "fromEffect")
			if err == nil {
				err = texts(src, "fromField", &fs.FromField, "fromEffect", &fs.FromEffect)
			}
			if v, ok := src["value"]; ok && err == nil {
				fs.Value, err = contract.AppendValue(nil, v)
			}
			if err != nil {
				return fmt.Errorf(".set.%s: %w", field, err)
			}
			e.Set[field] = fs
		}
	}
	clear, err := array(em["clear"])
	if err != nil {
		return fmt.Errorf(".clear: %w", err)
	}
	for j, cv := range clear {
		f, ok := cv.(string)
		if !ok {
			return fmt.Errorf(".clear[%d]: not a string", j)
		}
		e.Clear = append(e.Clear, f)
	}
	return nil
}

func decodeRefusal(v any) (*contract.Refusal, error) {
	m, err := object(v, "kind", "code", "field")
	if err != nil || v == nil {
		return nil, err
	}
	r := &contract.Refusal{}
	if err := texts(m, "kind", &r.Kind, "code", &r.Code, "field", &r.Field); err != nil {
		return nil, err
	}
	return r, nil
}

func decodeHook(doc any, out *contract.HookResult) error {
	m, err := object(doc, "outcome", "kind")
	if err != nil {
		return err
	}
	*out = contract.HookResult{}
	var outcome string
	if err := texts(m, "outcome", &outcome, "kind", &out.Kind); err != nil {
		return err
	}
	out.Outcome = contract.HookOutcome(outcome)
	return nil
}

func decodeAction(doc any, out *contract.ActionResult) error {
	m, err := object(doc, "writes", "refusal")
	if err != nil {
		return err
	}
	*out = contract.ActionResult{}
	if out.Refusal, err = decodeRefusal(m["refusal"]); err != nil {
		return fmt.Errorf("refusal: %w", err)
	}
	writes, err := array(m["writes"])
	if err != nil {
		return fmt.Errorf("writes: %w", err)
	}
	for i, wv := range writes {
		var w contract.ActionWrite
		wm, err := object(wv, "id", "set")
		if err == nil {
			err = texts(wm, "id", &w.ID)
		}
		if err != nil {
			return fmt.Errorf("writes[%d]: %w", i, err)
		}
		if sv := wm["set"]; sv != nil {
			set, ok := sv.(map[string]any)
			if !ok {
				return fmt.Errorf("writes[%d].set: not an object", i)
			}
			w.Set = make(map[string]json.RawMessage, len(set))
			for field, v := range set {
				if w.Set[field], err = contract.AppendValue(nil, v); err != nil {
					return fmt.Errorf("writes[%d].set.%s: %w", i, field, err)
				}
			}
		}
		out.Writes = append(out.Writes, w)
	}
	return nil
}

// canonicalOutput returns the RFC 8785 form of a validated result. Every
// name in a validated result is plain ASCII, which needs no escaping and
// sorts the same in UTF-16 as in bytes; a result holding anything else (it
// cannot pass validation) is written by the general canonicaliser.
func canonicalOutput(out any) ([]byte, error) {
	var b []byte
	var err error
	switch o := out.(type) {
	case *contract.PlanResult:
		b, err = appendCanonicalPlan(make([]byte, 0, 512), o)
	case *contract.HookResult:
		b, err = appendCanonicalHook(nil, o)
	case *contract.ActionResult:
		b, err = appendCanonicalAction(make([]byte, 0, 256), o)
	default:
		return canonjson.Marshal(out)
	}
	if errors.Is(err, errNotPlain) {
		return canonjson.Marshal(out)
	}
	return b, err
}

// errNotPlain stops the canonical writers at a string that would need
// escaping.
var errNotPlain = errors.New("not a plain name")

// appendPlain appends a member name or string value that must be plain.
func appendPlain(b []byte, s string) ([]byte, error) {
	for i := 0; i < len(s); i++ {
		if c := s[i]; c < 0x20 || c >= 0x7f || c == '"' || c == '\\' {
			return nil, errNotPlain
		}
	}
	b = append(b, '"')
	b = append(b, s...)
	return append(b, '"'), nil
}

// member appends `"key":"value"`, after a comma when comma is set.
func member(b []byte, comma bool, key, value string) ([]byte, error) {
	if comma {
		b = append(b, ',')
	}
	b = append(b, '"')
	b = append(b, key...)
	b = append(b, `":`...)
	return appendPlain(b, value)
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
		if b, err = appendCanonicalRefusal(b, r.Refusal); err != nil {
			return nil, err
		}
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
			if b, err = appendPlain(b, f); err != nil {
				return nil, err
			}
		}
		b = append(b, "],"...)
	}
	if b, err = member(b, false, "id", e.ID); err != nil {
		return nil, err
	}
	if b, err = member(b, true, "operation", string(e.Operation)); err != nil {
		return nil, err
	}
	if len(e.Set) > 0 {
		b = append(b, `,"set":{`...)
		var names [16]string
		keys := names[:0]
		for k := range e.Set {
			keys = append(keys, k)
		}
		slices.Sort(keys)
		for i, k := range keys {
			if i > 0 {
				b = append(b, ',')
			}
			if b, err = appendPlain(b, k); err != nil {
				return nil, err
			}
			b = append(b, ':', '{')
			src := e.Set[k]
			comma := false
			if src.FromEffect != "" {
				if b, err = member(b, comma, "fromEffect", src.FromEffect); err != nil {
					return nil, err
				}
				comma = true
			}
			if src.FromField != "" {
				if b, err = member(b, comma, "fromField", src.FromField); err != nil {
					return nil, err
				}
				comma = true
			}
			if len(src.Value) > 0 {
				if comma {
					b = append(b, ',')
				}
				b = append(b, `"value":`...)
				if b, err = appendCanonicalValue(b, src.Value); err != nil {
					return nil, err
				}
			}
			b = append(b, '}')
		}
		b = append(b, '}')
	}
	b = append(b, `,"target":{`...)
	if b, err = member(b, false, "entity", e.Target.Entity); err != nil {
		return nil, err
	}
	if e.Target.FromEffect != "" {
		if b, err = member(b, true, "fromEffect", e.Target.FromEffect); err != nil {
			return nil, err
		}
	}
	if e.Target.FromField != "" {
		if b, err = member(b, true, "fromField", e.Target.FromField); err != nil {
			return nil, err
		}
	}
	return append(b, "}}"...), nil
}

// appendCanonicalRefusal writes code, field, kind, each when set.
func appendCanonicalRefusal(b []byte, r *contract.Refusal) ([]byte, error) {
	var err error
	b = append(b, '{')
	comma := false
	for _, m := range [...]struct{ k, v string }{{"code", r.Code}, {"field", r.Field}, {"kind", r.Kind}} {
		if m.v == "" {
			continue
		}
		if b, err = member(b, comma, m.k, m.v); err != nil {
			return nil, err
		}
		comma = true
	}
	return append(b, '}'), nil
}

func appendCanonicalHook(b []byte, r *contract.HookResult) ([]byte, error) {
	var err error
	b = append(b, '{')
	comma := false
	if r.Kind != "" {
		if b, err = member(b, false, "kind", r.Kind); err != nil {
			return nil, err
		}
		comma = true
	}
	if b, err = member(b, comma, "outcome", string(r.Outcome)); err != nil {
		return nil, err
	}
	return append(b, '}'), nil
}

func appendCanonicalAction(b []byte, r *contract.ActionResult) ([]byte, error) {
	var err error
	b = append(b, '{')
	if r.Refusal != nil {
		b = append(b, `"refusal":`...)
		if b, err = appendCanonicalRefusal(b, r.Refusal); err != nil {
			return nil, err
		}
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
			if b, err = member(append(b, '{'), false, "id", w.ID); err != nil {
				return nil, err
			}
			b = append(b, `,"set":`...)
			if w.Set == nil {
				b = append(b, "null"...)
			} else {
				keys := make([]string, 0, len(w.Set))
				for k := range w.Set {
					keys = append(keys, k)
				}
				slices.Sort(keys)
				b = append(b, '{')
				for j, k := range keys {
					if j > 0 {
						b = append(b, ',')
					}
					if b, err = appendPlain(b, k); err != nil {
						return nil, err
					}
					b = append(b, ':')
					if b, err = appendCanonicalValue(b, w.Set[k]); err != nil {
						return nil, err
					}
				}
				b = append(b, '}')
			}
			b = append(b, '}')
		}
		b = append(b, ']')
	}
	return append(b, '}'), nil
}
