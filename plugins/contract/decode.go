package contract

import (
	"github.com/registrum/registrum/internal/strictjson"

	"encoding/json"
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
	err := outputParser(b).Document(func(p *strictjson.Parser) error {
		return listOrRefusal(p, "effects", &r.Refusal, func(depth int) error {
			r.Effects = append(r.Effects, Effect{})
			if err := decodeEffect(p, depth, &r.Effects[len(r.Effects)-1]); err != nil {
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
func listOrRefusal(p *strictjson.Parser, name string, refusal **Refusal, item func(depth int) error) error {
	return p.Members(1, []string{name, "refusal"}, func(key string, depth int) error {
		if p.Null() {
			return nil
		}
		if key == "refusal" {
			*refusal = &Refusal{}
			return decodeRefusal(p, depth, *refusal)
		}
		return p.Elements(depth, item)
	})
}

// decodeEffect reads one effect.
func decodeEffect(p *strictjson.Parser, depth int, e *Effect) error {
	if err := p.ExpectObject(); err != nil {
		return err
	}
	return p.Members(depth, []string{"id", "operation", "target", "set", "clear"}, func(key string, depth int) error {
		var err error
		switch key {
		case "id":
			e.ID, err = p.Text()
		case "operation":
			var op string
			op, err = p.Text()
			e.Operation = Operation(op)
		case "target":
			err = decodeTarget(p, depth, &e.Target)
		case "set":
			err = decodeSet(p, depth, e)
		case "clear":
			if p.Null() {
				return nil
			}
			err = p.Elements(depth, func(int) error {
				f, err := p.Text()
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

func decodeTarget(p *strictjson.Parser, depth int, t *Target) error {
	if p.Null() {
		return nil
	}
	if err := p.ExpectObject(); err != nil {
		return err
	}
	return p.Members(depth, []string{"entity", "fromField", "fromEffect"}, func(key string, _ int) error {
		s, err := p.Text()
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

func decodeSet(p *strictjson.Parser, depth int, e *Effect) error {
	if p.Null() {
		return nil
	}
	if err := p.ExpectObject(); err != nil {
		return err
	}
	e.Set = map[string]FieldSource{}
	return p.Members(depth, nil, func(field string, depth int) error {
		if _, dup := e.Set[field]; dup {
			return fmt.Errorf("%s: repeated member", field)
		}
		var fs FieldSource
		if !p.Null() {
			if err := p.ExpectObject(); err != nil {
				return fmt.Errorf("%s: %w", field, err)
			}
			err := p.Members(depth, []string{"value", "fromField", "fromEffect"}, func(key string, depth int) error {
				if key == "value" {
					raw, err := p.SkipValue(depth)
					if err != nil {
						return err
					}
					fs.Value = append([]byte(nil), raw...)
					return nil
				}
				s, err := p.Text()
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

func decodeRefusal(p *strictjson.Parser, depth int, r *Refusal) error {
	if err := p.ExpectObject(); err != nil {
		return fmt.Errorf("refusal: %w", err)
	}
	err := p.Members(depth, []string{"kind", "code", "field"}, func(key string, _ int) error {
		s, err := p.Text()
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

// DecodeHookResult reads a hook handler's output document with the rules
// of DecodePlanResult.
func DecodeHookResult(b []byte) (HookResult, error) {
	var r HookResult
	err := outputParser(b).Document(func(p *strictjson.Parser) error {
		return p.Members(1, []string{"outcome", "kind"}, func(key string, _ int) error {
			s, err := p.Text()
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
	err := outputParser(b).Document(func(p *strictjson.Parser) error {
		return listOrRefusal(p, "writes", &r.Refusal, func(depth int) error {
			r.Writes = append(r.Writes, ActionWrite{})
			if err := decodeActionWrite(p, depth, &r.Writes[len(r.Writes)-1]); err != nil {
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

func decodeActionWrite(p *strictjson.Parser, depth int, w *ActionWrite) error {
	if err := p.ExpectObject(); err != nil {
		return err
	}
	return p.Members(depth, []string{"id", "set"}, func(key string, depth int) error {
		if key == "id" {
			var err error
			w.ID, err = p.Text()
			return err
		}
		if p.Null() {
			return nil
		}
		if err := p.ExpectObject(); err != nil {
			return fmt.Errorf("set: %w", err)
		}
		w.Set = map[string]json.RawMessage{}
		return p.Members(depth, nil, func(field string, depth int) error {
			if _, dup := w.Set[field]; dup {
				return fmt.Errorf("set: %s: repeated member", field)
			}
			raw, err := p.SkipValue(depth)
			if err != nil {
				return err
			}
			w.Set[field] = append(json.RawMessage(nil), raw...)
			return nil
		})
	})
}

// outputParser returns a parser over a module's output, which checks strings.
func outputParser(b []byte) *strictjson.Parser {
	p := strictjson.NewParser(b, false)
	return &p
}
