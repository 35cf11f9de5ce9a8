package plugins

import (
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"slices"

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

// sortedNames returns the member names of m in ascending order.
func sortedNames[V any](m map[string]V) []string {
	return slices.Sorted(maps.Keys(m))
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
		for i, k := range sortedNames(e.Set) {
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
				b = append(b, '{')
				for j, k := range sortedNames(w.Set) {
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
