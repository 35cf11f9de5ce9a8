package contract

import (
	"encoding/json"
	"errors"
	"fmt"
)

// DecodePlanResult reads a planner's output document into a PlanResult
// without reflection and without building maps for its objects. It is
// strict: member names exactly as the JSON tags of PlanResult and its
// parts, unknown or repeated members refused, strings checked as ParseValue
// checks them, nesting bounded by MaxDepth, nothing after the document. A
// null member is the same as an absent one, except a set field's value,
// where null is the literal null. A set field's value is kept as the JSON
// text the module wrote. The result still has to pass Validate.
func DecodePlanResult(b []byte) (PlanResult, error) {
	var r PlanResult
	err := outputParser(b).document(func(p *parser) error {
		return p.listOrRefusal("effects", &r.Refusal, func(depth int) error {
			r.Effects = append(r.Effects, Effect{})
			if err := p.decodeEffect(depth, &r.Effects[len(r.Effects)-1]); err != nil {
				return fmt.Errorf("effects[%d]: %w", len(r.Effects)-1, err)
			}
			return nil
		})
	})
	if err != nil {
		return PlanResult{}, err
	}
	return r, nil
}

// listOrRefusal reads the members of a result object: the list member
// name, each element read by item, and "refusal".
func (p *parser) listOrRefusal(name string, refusal **Refusal, item func(depth int) error) error {
	return p.members(1, []string{name, "refusal"}, func(key string, depth int) error {
		if p.null() {
			return nil
		}
		if key == "refusal" {
			*refusal = &Refusal{}
			return p.decodeRefusal(depth, *refusal)
		}
		return p.elements(depth, item)
	})
}

// decodeEffect reads one effect.
func (p *parser) decodeEffect(depth int, e *Effect) error {
	if err := p.expectObject(); err != nil {
		return err
	}
	return p.members(depth, []string{"id", "operation", "target", "set", "clear"}, func(key string, depth int) error {
		var err error
		switch key {
		case "id":
			e.ID, err = p.text()
		case "operation":
			var op string
			op, err = p.text()
			e.Operation = Operation(op)
		case "target":
			err = p.decodeTarget(depth, &e.Target)
		case "set":
			err = p.decodeSet(depth, e)
		case "clear":
			if p.null() {
				return nil
			}
			err = p.elements(depth, func(int) error {
				f, err := p.text()
				e.Clear = append(e.Clear, f)
				return err
			})
		}
		if err != nil {
			return fmt.Errorf("%s: %w", key, err)
		}
		return nil
	})
}

func (p *parser) decodeTarget(depth int, t *Target) error {
	if p.null() {
		return nil
	}
	if err := p.expectObject(); err != nil {
		return err
	}
	return p.members(depth, []string{"entity", "fromField", "fromEffect"}, func(key string, _ int) error {
		s, err := p.text()
		switch key {
		case "entity":
			t.Entity = s
		case "fromField":
			t.FromField = s
		default:
			t.FromEffect = s
		}
		return err
	})
}

func (p *parser) decodeSet(depth int, e *Effect) error {
	if p.null() {
		return nil
	}
	if err := p.expectObject(); err != nil {
		return err
	}
	e.Set = map[string]FieldSource{}
	return p.members(depth, nil, func(field string, depth int) error {
		if _, dup := e.Set[field]; dup {
			return fmt.Errorf("%s: repeated member", field)
		}
		var fs FieldSource
		if !p.null() {
			if err := p.expectObject(); err != nil {
				return fmt.Errorf("%s: %w", field, err)
			}
			err := p.members(depth, []string{"value", "fromField", "fromEffect"}, func(key string, depth int) error {
				if key == "value" {
					start := p.i
					if err := p.skip(depth); err != nil {
						return err
					}
					fs.Value = append([]byte(nil), p.b[start:p.i]...)
					return nil
				}
				s, err := p.text()
				if key == "fromField" {
					fs.FromField = s
				} else {
					fs.FromEffect = s
				}
				return err
			})
			if err != nil {
				return fmt.Errorf("%s: %w", field, err)
			}
		}
		e.Set[field] = fs
		return nil
	})
}

func (p *parser) decodeRefusal(depth int, r *Refusal) error {
	if err := p.expectObject(); err != nil {
		return fmt.Errorf("refusal: %w", err)
	}
	err := p.members(depth, []string{"kind", "code", "field"}, func(key string, _ int) error {
		s, err := p.text()
		switch key {
		case "kind":
			r.Kind = s
		case "code":
			r.Code = s
		default:
			r.Field = s
		}
		return err
	})
	if err != nil {
		return fmt.Errorf("refusal: %w", err)
	}
	return nil
}

// expectObject fails unless an object starts at p.
func (p *parser) expectObject() error {
	if p.i >= len(p.b) || p.b[p.i] != '{' {
		return errors.New("not an object")
	}
	return nil
}

// null reads a null at p, if there is one.
func (p *parser) null() bool {
	if len(p.b)-p.i >= 4 && string(p.b[p.i:p.i+4]) == "null" {
		p.i += 4
		return true
	}
	return false
}

// text reads a string, or a null as "".
func (p *parser) text() (string, error) {
	if p.null() {
		return "", nil
	}
	if p.i >= len(p.b) || p.b[p.i] != '"' {
		return "", errors.New("not a string")
	}
	return p.str()
}

// members reads the object starting at p, calling fn with p at each
// member's value and the depth of values inside it. Names not in allowed
// (when allowed is not nil) and repeated names are refused.
func (p *parser) members(depth int, allowed []string, fn func(key string, depth int) error) error {
	if depth > MaxDepth {
		return p.fail("nesting too deep")
	}
	p.i++ // {
	p.space()
	if p.i < len(p.b) && p.b[p.i] == '}' {
		p.i++
		return nil
	}
	var seen uint64
	for {
		k, err := p.key()
		if err != nil {
			return err
		}
		if allowed != nil {
			n := -1
			for j, a := range allowed {
				if a == k {
					n = j
				}
			}
			if n < 0 {
				return fmt.Errorf("unknown member %q", k)
			}
			if seen&(1<<n) != 0 {
				return fmt.Errorf("repeated member %q", k)
			}
			seen |= 1 << n
		}
		if err := fn(k, depth+1); err != nil {
			return err
		}
		p.space()
		if p.i >= len(p.b) {
			return p.fail("unexpected end")
		}
		switch p.b[p.i] {
		case ',':
			p.i++
		case '}':
			p.i++
			return nil
		default:
			return p.fail("expected ',' or '}'")
		}
	}
}

// elements reads the array starting at p, calling fn with p at each
// element and the depth of values inside it.
func (p *parser) elements(depth int, fn func(depth int) error) error {
	if depth > MaxDepth {
		return p.fail("nesting too deep")
	}
	if p.i >= len(p.b) || p.b[p.i] != '[' {
		return errors.New("not an array")
	}
	p.i++
	p.space()
	if p.i < len(p.b) && p.b[p.i] == ']' {
		p.i++
		return nil
	}
	for {
		p.space()
		if err := fn(depth + 1); err != nil {
			return err
		}
		p.space()
		if p.i >= len(p.b) {
			return p.fail("unexpected end")
		}
		switch p.b[p.i] {
		case ',':
			p.i++
		case ']':
			p.i++
			return nil
		default:
			return p.fail("expected ',' or ']'")
		}
	}
}

// DecodeHookResult reads a hook handler's output document with the rules
// of DecodePlanResult.
func DecodeHookResult(b []byte) (HookResult, error) {
	var r HookResult
	err := outputParser(b).document(func(p *parser) error {
		return p.members(1, []string{"outcome", "kind"}, func(key string, _ int) error {
			s, err := p.text()
			if key == "outcome" {
				r.Outcome = HookOutcome(s)
			} else {
				r.Kind = s
			}
			return err
		})
	})
	if err != nil {
		return HookResult{}, err
	}
	return r, nil
}

// DecodeActionResult reads an action handler's output document with the
// rules of DecodePlanResult; a write's values are kept as the JSON text the
// module wrote.
func DecodeActionResult(b []byte) (ActionResult, error) {
	var r ActionResult
	err := outputParser(b).document(func(p *parser) error {
		return p.listOrRefusal("writes", &r.Refusal, func(depth int) error {
			r.Writes = append(r.Writes, ActionWrite{})
			if err := p.decodeActionWrite(depth, &r.Writes[len(r.Writes)-1]); err != nil {
				return fmt.Errorf("writes[%d]: %w", len(r.Writes)-1, err)
			}
			return nil
		})
	})
	if err != nil {
		return ActionResult{}, err
	}
	return r, nil
}

func (p *parser) decodeActionWrite(depth int, w *ActionWrite) error {
	if err := p.expectObject(); err != nil {
		return err
	}
	return p.members(depth, []string{"id", "set"}, func(key string, depth int) error {
		if key == "id" {
			var err error
			w.ID, err = p.text()
			return err
		}
		if p.null() {
			return nil
		}
		if err := p.expectObject(); err != nil {
			return fmt.Errorf("set: %w", err)
		}
		w.Set = map[string]json.RawMessage{}
		return p.members(depth, nil, func(field string, depth int) error {
			if _, dup := w.Set[field]; dup {
				return fmt.Errorf("set: %s: repeated member", field)
			}
			start := p.i
			if err := p.skip(depth); err != nil {
				return err
			}
			w.Set[field] = append(json.RawMessage(nil), p.b[start:p.i]...)
			return nil
		})
	})
}

// outputParser returns a parser over a module's output, which checks strings.
func outputParser(b []byte) *parser { return &parser{b: b} }

// document reads one top-level object with fn and refuses anything after it.
func (p *parser) document(fn func(p *parser) error) error {
	p.space()
	if err := p.expectObject(); err != nil {
		return err
	}
	if err := fn(p); err != nil {
		return err
	}
	p.space()
	if p.i != len(p.b) {
		return p.fail("trailing data")
	}
	return nil
}
